// Recurrent ops: RNN, GRU, LSTM (all versions: directions, layout 0/1, sequence_lens, initial states,
// peepholes, clip, linear_before_reset, input_forget, activation lists with alpha/beta).
//
// Per direction, the input projection X*W^T (+ biases) runs as one GEMM over all time steps; each step
// then does H*R^T as a GEMM and the gates elementwise.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <type_traits>

#include "ops/gemm/gemm.h"
#include "ops/conv/conv_geometry.h"

namespace nxrt::ops {

namespace {

enum class RnnKind { kRnn, kGru, kLstm };

struct RnnActivation {  // the ONNX RNN/GRU/LSTM activation list (stable Sigmoid, Affine, Elu, ...)
  enum Kind { kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu,
              kSoftsign, kSoftplus };
  Kind kind = kTanh;
  float alpha = 0, beta = 0;

  template <typename CT>
  void apply(CT* v, int64_t n) const {
    const CT a = static_cast<CT>(alpha), b = static_cast<CT>(beta);
    switch (kind) {
      case kRelu: for (int64_t i = 0; i < n; ++i) v[i] = std::max(v[i], CT(0)); break;
      case kTanh: for (int64_t i = 0; i < n; ++i) v[i] = std::tanh(v[i]); break;
      case kSigmoid:
        for (int64_t i = 0; i < n; ++i) {
          const CT x = v[i];
          v[i] = x >= 0 ? CT(1) / (CT(1) + std::exp(-x)) : std::exp(x) / (CT(1) + std::exp(x));
        }
        break;
      case kAffine: for (int64_t i = 0; i < n; ++i) v[i] = a * v[i] + b; break;
      case kLeakyRelu: for (int64_t i = 0; i < n; ++i) v[i] = v[i] >= 0 ? v[i] : a * v[i]; break;
      case kThresholdedRelu: for (int64_t i = 0; i < n; ++i) v[i] = v[i] > a ? v[i] : CT(0); break;
      case kScaledTanh: for (int64_t i = 0; i < n; ++i) v[i] = a * std::tanh(b * v[i]); break;
      case kHardSigmoid:
        for (int64_t i = 0; i < n; ++i) v[i] = std::max(CT(0), std::min(CT(1), a * v[i] + b));
        break;
      case kElu: for (int64_t i = 0; i < n; ++i) v[i] = v[i] >= 0 ? v[i] : a * (std::exp(v[i]) - CT(1)); break;
      case kSoftsign: for (int64_t i = 0; i < n; ++i) v[i] = v[i] / (CT(1) + std::fabs(v[i])); break;
      case kSoftplus:
        for (int64_t i = 0; i < n; ++i) {
          const CT x = v[i];
          v[i] = x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
        }
        break;
    }
  }
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Builds the activation list; alpha/beta values are consumed in order by the functions that take them.
Status parse_activations(const ep::KernelInfo& info, const std::vector<std::string>& names,
                         std::vector<RnnActivation>* out) {
  const std::vector<float> alphas = info.attr_floats("activation_alpha");
  const std::vector<float> betas = info.attr_floats("activation_beta");
  size_t ai = 0, bi = 0;
  auto next_a = [&](float d) { return ai < alphas.size() ? alphas[ai++] : d; };
  auto next_b = [&](float d) { return bi < betas.size() ? betas[bi++] : d; };
  for (const std::string& raw : names) {
    const std::string n = lower(raw);
    RnnActivation a;
    if (n == "relu") {
      a.kind = RnnActivation::kRelu;
    } else if (n == "tanh") {
      a.kind = RnnActivation::kTanh;
    } else if (n == "sigmoid") {
      a.kind = RnnActivation::kSigmoid;
    } else if (n == "affine") {
      a.kind = RnnActivation::kAffine;
      a.alpha = next_a(1.f);
      a.beta = next_b(0.f);
    } else if (n == "leakyrelu") {
      a.kind = RnnActivation::kLeakyRelu;
      a.alpha = next_a(0.01f);
    } else if (n == "thresholdedrelu") {
      a.kind = RnnActivation::kThresholdedRelu;
      a.alpha = next_a(1.f);
    } else if (n == "scaledtanh") {
      a.kind = RnnActivation::kScaledTanh;
      a.alpha = next_a(1.f);
      a.beta = next_b(1.f);
    } else if (n == "hardsigmoid") {
      a.kind = RnnActivation::kHardSigmoid;
      a.alpha = next_a(0.2f);
      a.beta = next_b(0.5f);
    } else if (n == "elu") {
      a.kind = RnnActivation::kElu;
      a.alpha = next_a(1.f);
    } else if (n == "softsign") {
      a.kind = RnnActivation::kSoftsign;
    } else if (n == "softplus") {
      a.kind = RnnActivation::kSoftplus;
    } else {
      return info.error("unknown activation '" + raw + "'");
    }
    out->push_back(a);
  }
  return Status::Ok();
}

template <typename CT, typename T>
std::vector<CT> values_as(const Tensor& t) {
  std::vector<CT> v(static_cast<size_t>(t.numel()));
  convert_buffer<T, CT>(t.data<T>(), v.data(), t.numel());
  return v;
}

template <RnnKind kKind>
class RnnKernel final : public ep::Kernel {
 public:
  static constexpr int64_t kGates = kKind == RnnKind::kRnn ? 1 : (kKind == RnnKind::kGru ? 3 : 4);
  static constexpr size_t kActsPerDir = kKind == RnnKind::kRnn ? 1 : (kKind == RnnKind::kGru ? 2 : 3);

  Status init(const ep::KernelInfo& info) {
    isa_ = info.isa();
    const std::string dir = info.attr_string("direction", "forward");
    if (dir == "forward") {
      dirs_ = 1;
    } else if (dir == "reverse") {
      dirs_ = 1;
      reverse_only_ = true;
    } else if (dir == "bidirectional") {
      dirs_ = 2;
    } else {
      return info.error("direction must be forward, reverse or bidirectional, got '" + dir + "'");
    }
    hidden_ = info.attr_int("hidden_size", 0);
    layout_ = info.attr_int("layout", 0);
    if (layout_ != 0 && layout_ != 1) return info.error("layout must be 0 or 1");
    clip_ = info.has_attr("clip") ? info.attr_float("clip", 0.f) : 0.f;
    if (info.has_attr("clip") && !(clip_ > 0)) return info.error("clip must be positive");
    linear_before_reset_ = info.attr_int("linear_before_reset", 0) != 0;
    input_forget_ = info.attr_int("input_forget", 0) != 0;
    std::vector<std::string> names = info.attr_strings("activations");
    if (names.empty()) {
      for (int64_t d = 0; d < dirs_; ++d) {
        if (kKind == RnnKind::kRnn) {
          names.push_back("Tanh");
        } else if (kKind == RnnKind::kGru) {
          names.insert(names.end(), {"Sigmoid", "Tanh"});
        } else {
          names.insert(names.end(), {"Sigmoid", "Tanh", "Tanh"});
        }
      }
    } else if (names.size() == kActsPerDir && dirs_ == 2) {
      std::vector<std::string> twice = names;
      twice.insert(twice.end(), names.begin(), names.end());
      names = twice;
    }
    if (names.size() != kActsPerDir * static_cast<size_t>(dirs_)) {
      return info.error("activations must list " + std::to_string(kActsPerDir) + " functions per direction, got " +
                        std::to_string(names.size()));
    }
    return parse_activations(info, names, &acts_);
  }

  Status compute(ep::KernelContext& ctx) const override {
    const Tensor& X = ctx.input(0);
    return dispatch_float(
        X.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          using CT = std::conditional_t<std::is_same_v<T, double>, double, float>;
          return run<T, CT>(ctx);
        },
        [&] { return ctx.error(std::string(ctx.info().op_type()) + " does not support dtype " + dtype_name(X.dtype())); });
  }

 private:
  template <typename T, typename CT>
  Status run(ep::KernelContext& ctx) const {
    const Tensor& X = ctx.input(0);
    if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.error("missing input W or R");
    const Tensor& W = ctx.input(1);
    const Tensor& R = ctx.input(2);
    if (X.rank() != 3) return ctx.error("X must be 3-D, got " + X.describe());
    const int64_t S = layout_ == 0 ? X.dim(0) : X.dim(1);
    const int64_t Bn = layout_ == 0 ? X.dim(1) : X.dim(0);
    const int64_t I = X.dim(2);
    const int64_t D = dirs_;
    int64_t Hd = hidden_;
    if (Hd <= 0 && W.rank() == 3) Hd = W.dim(1) / kGates;
    const int64_t GH = kGates * Hd;
    if (W.dtype() != X.dtype() || R.dtype() != X.dtype()) return ctx.error("W and R must have X's dtype");
    if (W.shape() != Dims{D, GH, I}) {
      return ctx.error("W " + W.describe() + " must have shape " + shape_to_string({D, GH, I}));
    }
    if (R.shape() != Dims{D, GH, Hd}) {
      return ctx.error("R " + R.describe() + " must have shape " + shape_to_string({D, GH, Hd}));
    }
    auto opt = [&](size_t i) -> const Tensor* { return ctx.has_input(i) ? &ctx.input(i) : nullptr; };
    const Tensor* Bt = opt(3);
    const Tensor* SL = opt(4);
    const Tensor* H0 = opt(5);
    const Tensor* C0 = kKind == RnnKind::kLstm ? opt(6) : nullptr;
    const Tensor* P = kKind == RnnKind::kLstm ? opt(7) : nullptr;
    if (Bt && (Bt->dtype() != X.dtype() || Bt->shape() != Dims{D, 2 * GH})) {
      return ctx.error("B " + Bt->describe() + " must have shape " + shape_to_string({D, 2 * GH}));
    }
    const Dims state_shape = layout_ == 0 ? Dims{D, Bn, Hd} : Dims{Bn, D, Hd};
    for (const Tensor* st : {H0, C0}) {
      if (st && (st->dtype() != X.dtype() || st->shape() != state_shape)) {
        return ctx.error("initial state " + st->describe() + " must have shape " + shape_to_string(state_shape));
      }
    }
    if (P && (P->dtype() != X.dtype() || P->shape() != Dims{D, 3 * Hd})) {
      return ctx.error("P " + P->describe() + " must have shape " + shape_to_string({D, 3 * Hd}));
    }
    std::vector<int64_t> lens(static_cast<size_t>(Bn), S);
    if (SL) {
      NXRT_ASSIGN_OR_RETURN(lens, read_int_values(*SL));
      if (static_cast<int64_t>(lens.size()) != Bn) return ctx.error("sequence_lens must have batch_size values");
      for (int64_t l : lens)
        if (l < 0 || l > S) return ctx.error("sequence_lens value " + std::to_string(l) + " outside [0, " + std::to_string(S) + "]");
    }

    // Inputs in compute type, time-major.
    std::vector<CT> x(static_cast<size_t>(S * Bn * I));
    {
      const T* xs = X.data<T>();
      for (int64_t t = 0; t < S; ++t)
        for (int64_t b = 0; b < Bn; ++b) {
          const T* src = layout_ == 0 ? xs + (t * Bn + b) * I : xs + (b * S + t) * I;
          convert_buffer<T, CT>(src, x.data() + (t * Bn + b) * I, I);
        }
    }
    // Float weights are used where they are (a 128-unit LSTM's W and R are 512 KB: copying them on
    // every call cost more than the recurrence itself); other dtypes are converted once per call.
    std::vector<CT> w_conv, r_conv;
    const CT* w_ptr = nullptr;
    const CT* r_ptr = nullptr;
    if constexpr (std::is_same_v<T, CT>) {
      w_ptr = W.data<T>();
      r_ptr = R.data<T>();
    } else {
      w_conv = values_as<CT, T>(W);
      r_conv = values_as<CT, T>(R);
      w_ptr = w_conv.data();
      r_ptr = r_conv.data();
    }
    std::vector<CT> bias = Bt ? values_as<CT, T>(*Bt) : std::vector<CT>(static_cast<size_t>(D * 2 * GH), CT(0));
    std::vector<CT> peep = P ? values_as<CT, T>(*P) : std::vector<CT>(static_cast<size_t>(D * 3 * Hd), CT(0));
    auto state_in = [&](const Tensor* st, int64_t d, std::vector<CT>* out) {
      out->assign(static_cast<size_t>(Bn * Hd), CT(0));
      if (!st) return;
      const T* s = st->data<T>();
      for (int64_t b = 0; b < Bn; ++b) {
        const T* src = layout_ == 0 ? s + (d * Bn + b) * Hd : s + (b * D + d) * Hd;
        convert_buffer<T, CT>(src, out->data() + b * Hd, Hd);
      }
    };

    std::vector<CT> y(static_cast<size_t>(S * D * Bn * Hd), CT(0));  // [S, D, B, H]
    std::vector<CT> yh(static_cast<size_t>(D * Bn * Hd)), yc(static_cast<size_t>(D * Bn * Hd));
    std::vector<CT> xw(static_cast<size_t>(S * Bn * GH)), hr(static_cast<size_t>(Bn * GH));
    std::vector<CT> h, c, gate(static_cast<size_t>(GH)), rh(static_cast<size_t>(Bn * Hd)), hh(static_cast<size_t>(Bn * Hd));
    ep::ThreadPool* pool = &ctx.pool();

    for (int64_t d = 0; d < D; ++d) {
      const bool reverse = reverse_only_ || d == 1;
      const CT* wd = w_ptr + d * GH * I;
      const CT* rd = r_ptr + d * GH * Hd;
      const CT* wb = bias.data() + d * 2 * GH;
      const CT* rb = wb + GH;
      const CT* pd = peep.data() + d * 3 * Hd;
      const RnnActivation* act = acts_.data() + d * kActsPerDir;
      // xw = X * W^T + Wb + Rb (GRU with linear_before_reset keeps Rb of the h gate for later).
      gemm<CT>(false, true, S * Bn, GH, I, CT(1), x.data(), I, wd, I, CT(0), xw.data(), GH, pool, isa_);
      for (int64_t row = 0; row < S * Bn; ++row) {
        CT* p = xw.data() + row * GH;
        for (int64_t j = 0; j < GH; ++j) {
          const bool keep_rb = kKind == RnnKind::kGru && linear_before_reset_ && j >= 2 * Hd;
          p[j] += wb[j] + (keep_rb ? CT(0) : rb[j]);
        }
      }
      state_in(H0, d, &h);
      if constexpr (kKind == RnnKind::kLstm) state_in(C0, d, &c);

      for (int64_t s = 0; s < S; ++s) {
        // hr = H * R^T; for GRU without linear_before_reset only the z and r gates here.
        const int64_t ncols = (kKind == RnnKind::kGru && !linear_before_reset_) ? 2 * Hd : GH;
        gemm<CT>(false, true, Bn, ncols, Hd, CT(1), h.data(), Hd, rd, Hd, CT(0), hr.data(), GH, nullptr, isa_);
        for (int64_t b = 0; b < Bn; ++b) {
          if (s >= lens[b]) continue;
          const int64_t t = reverse ? lens[b] - 1 - s : s;
          const CT* xg = xw.data() + (t * Bn + b) * GH;
          const CT* hg = hr.data() + b * GH;
          CT* hb = h.data() + b * Hd;
          CT* cb = kKind == RnnKind::kLstm ? c.data() + b * Hd : nullptr;
          cell<CT>(xg, hg, hb, cb, gate.data(), rh.data() + b * Hd, rd, rb, pd, act, Hd);
          std::copy(hb, hb + Hd, y.data() + ((t * D + d) * Bn + b) * Hd);
        }
      }
      std::copy(h.begin(), h.end(), yh.begin() + d * Bn * Hd);
      if constexpr (kKind == RnnKind::kLstm) std::copy(c.begin(), c.end(), yc.begin() + d * Bn * Hd);
    }

    return write_outputs<T, CT>(ctx, X.dtype(), S, D, Bn, Hd, state_shape, y, yh, yc);
  }

  // One time step of one batch row: hb (and, for LSTM, cb) from the gate sums xg (input side, biases
  // added) and hg (recurrent side); gate holds kGates * Hd scratch values, rhb Hd (GRU).
  template <typename CT>
  void cell(const CT* xg, const CT* hg, CT* hb, CT* cb, CT* gate, CT* rhb, const CT* rd, const CT* rb, const CT* pd,
            const RnnActivation* act, int64_t Hd) const {
    [[maybe_unused]] const int64_t GH = kGates * Hd;
    const CT clip = static_cast<CT>(clip_);
    auto clamp = [&](CT* v, int64_t n) {
      if (clip_ > 0)
        for (int64_t i = 0; i < n; ++i) v[i] = std::max(-clip, std::min(clip, v[i]));
    };
    if constexpr (kKind == RnnKind::kRnn) {
      for (int64_t j = 0; j < Hd; ++j) gate[j] = xg[j] + hg[j];
      clamp(gate, Hd);
      act[0].apply(gate, Hd);
      std::copy(gate, gate + Hd, hb);
    } else if constexpr (kKind == RnnKind::kLstm) {
      CT* gi = gate;
      CT* go = gi + Hd;
      CT* gf = go + Hd;
      CT* gc = gf + Hd;
      for (int64_t j = 0; j < GH; ++j) gate[j] = xg[j] + hg[j];
      for (int64_t j = 0; j < Hd; ++j) {
        gi[j] += pd[j] * cb[j];
        gf[j] += pd[2 * Hd + j] * cb[j];
      }
      clamp(gi, Hd);
      act[0].apply(gi, Hd);
      if (input_forget_) {
        for (int64_t j = 0; j < Hd; ++j) gf[j] = CT(1) - gi[j];
      } else {
        clamp(gf, Hd);
        act[0].apply(gf, Hd);
      }
      clamp(gc, Hd);
      act[1].apply(gc, Hd);
      for (int64_t j = 0; j < Hd; ++j) cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
      for (int64_t j = 0; j < Hd; ++j) go[j] += pd[Hd + j] * cb[j];
      clamp(go, Hd);
      act[0].apply(go, Hd);
      for (int64_t j = 0; j < Hd; ++j) gc[j] = cb[j];  // h(Ct)
      act[2].apply(gc, Hd);
      for (int64_t j = 0; j < Hd; ++j) hb[j] = go[j] * gc[j];
    } else {  // GRU: gates z, r, h
      CT* gz = gate;
      CT* gr = gz + Hd;
      CT* gh = gr + Hd;
      for (int64_t j = 0; j < 2 * Hd; ++j) gate[j] = xg[j] + hg[j];
      clamp(gz, 2 * Hd);
      act[0].apply(gz, 2 * Hd);
      if (linear_before_reset_) {
        for (int64_t j = 0; j < Hd; ++j) gh[j] = xg[2 * Hd + j] + gr[j] * (hg[2 * Hd + j] + rb[2 * Hd + j]);
      } else {
        // (r . H) * Rh^T for this batch row
        for (int64_t j = 0; j < Hd; ++j) rhb[j] = gr[j] * hb[j];
        const CT* rhw = rd + 2 * Hd * Hd;
        for (int64_t j = 0; j < Hd; ++j) {
          CT acc = 0;
          const CT* wr = rhw + j * Hd;
          for (int64_t k = 0; k < Hd; ++k) acc += rhb[k] * wr[k];
          gh[j] = xg[2 * Hd + j] + acc;
        }
      }
      clamp(gh, Hd);
      act[1].apply(gh, Hd);
      for (int64_t j = 0; j < Hd; ++j) hb[j] = (CT(1) - gz[j]) * gh[j] + gz[j] * hb[j];
    }
  }

  // Y (all steps) and the final states in the requested layout.
  template <typename T, typename CT>
  Status write_outputs(ep::KernelContext& ctx, DataType dt, int64_t S, int64_t D, int64_t Bn, int64_t Hd,
                       const Dims& state_shape, const std::vector<CT>& y, const std::vector<CT>& yh,
                       const std::vector<CT>& yc) const {
    // Outputs in the requested layout.
    if (ctx.num_outputs() > 0 && ctx.output_requested(0)) {
      const Dims ys = layout_ == 0 ? Dims{S, D, Bn, Hd} : Dims{Bn, S, D, Hd};
      NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, dt, ys));
      T* yo = Y->data<T>();
      for (int64_t t = 0; t < S; ++t)
        for (int64_t d = 0; d < D; ++d)
          for (int64_t b = 0; b < Bn; ++b) {
            const CT* src = y.data() + ((t * D + d) * Bn + b) * Hd;
            T* dst = layout_ == 0 ? yo + ((t * D + d) * Bn + b) * Hd : yo + ((b * S + t) * D + d) * Hd;
            for (int64_t j = 0; j < Hd; ++j) dst[j] = from_ct<T>(src[j]);
          }
    }
    auto write_state = [&](size_t idx, const std::vector<CT>& st) -> Status {
      if (idx >= ctx.num_outputs() || !ctx.output_requested(idx)) return Status::Ok();
      NXRT_ASSIGN_OR_RETURN(Tensor * O, ctx.allocate_output(idx, dt, state_shape));
      T* o = O->data<T>();
      for (int64_t d = 0; d < D; ++d)
        for (int64_t b = 0; b < Bn; ++b) {
          const CT* src = st.data() + (d * Bn + b) * Hd;
          T* dst = layout_ == 0 ? o + (d * Bn + b) * Hd : o + (b * D + d) * Hd;
          for (int64_t j = 0; j < Hd; ++j) dst[j] = from_ct<T>(src[j]);
        }
      return Status::Ok();
    };
    NXRT_RETURN_IF_ERROR(write_state(1, yh));
    if constexpr (kKind == RnnKind::kLstm) NXRT_RETURN_IF_ERROR(write_state(2, yc));
    return Status::Ok();
  }

  int64_t dirs_ = 1;
  bool reverse_only_ = false;
  int64_t hidden_ = 0;
  int64_t layout_ = 0;
  float clip_ = 0;
  bool linear_before_reset_ = false;
  bool input_forget_ = false;
  std::vector<RnnActivation> acts_;
  ep::IsaTier isa_ = ep::cpu_isa_tier();
};

}  // namespace

void register_rnn_kernels(ep::KernelRegistry& r) {
  r.add_class<RnnKernel<RnnKind::kRnn>>("", "RNN", 1);
  r.add_class<RnnKernel<RnnKind::kGru>>("", "GRU", 1);
  r.add_class<RnnKernel<RnnKind::kLstm>>("", "LSTM", 1);
}

}  // namespace nxrt::ops
