// Recurrent ops: RNN, GRU, LSTM (all versions: directions, layout 0/1, sequence_lens, initial states,
// peepholes, clip, linear_before_reset, input_forget, activation lists with alpha/beta).
//
// Per direction, the input projection X*W^T (+ biases) runs as one GEMM over all time steps; each step
// then does H*R^T as a GEMM and the gates elementwise.
//
// specialize checks the shapes once and makes an RnnVariant: the dims, the float GEMM's plans for the
// projection and the step, and every per-call buffer as one declared workspace. compute without a
// variant makes the same variant per call, so there is one code path.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <memory>
#include <type_traits>

#include "ep/input_facts.h"
#include "ops/gemm/gemm.h"
#include "ops/conv/conv_geometry.h"

namespace nxrt::ops {

namespace {

using ep::InputFacts;
using ep::variant_error;
using ep::variant_or_make;

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

// An RNN/GRU/LSTM node's state at one set of input dtypes and shapes: the checked dims, the float
// GEMM's plans and the workspace every buffer of compute comes from.
struct RnnVariant final : ep::KernelVariant {
  size_t workspace_bytes() const override { return scratch.bytes(); }
  InputFacts in;  // what it was made for
  int64_t S = 0, Bn = 0, I = 0, D = 0, Hd = 0, GH = 0;  // seq_len, batch, input size, directions, hidden
  int64_t step_cols = 0;  // columns of each step's H * R^T (GRU without linear_before_reset: z and r only)
  Dims state_shape;
  bool x_in_place = false;  // float X in layout 0 is already time-major: the projection reads it in place
  // Float path: X * W^T over all steps on the pool, and each step's H * R^T on the calling thread.
  GemmPlan proj_plan, step_plan;
  // Workspace arrays (offsets into `scratch`, compute-type elements unless noted): X time-major; W and R
  // converted (float16/bfloat16); biases, peepholes; Y [S, D, B, H]; final h and c per direction; the
  // projection [S*B, GH]; one step's H * R^T; the running h and c; one row's gates and GRU's r . h; the
  // sequence lengths (int64); the float GEMM's packing scratch (one slot per thread).
  ScratchLayout scratch;
  size_t x = 0, w_conv = 0, r_conv = 0, bias = 0, peep = 0, y = 0, yh = 0, yc = 0, xw = 0, hr = 0, h = 0, c = 0,
         gate = 0, rh = 0, lens = 0;
  GemmSlots gemm;
};

template <RnnKind kKind>
class RnnKernel final : public ep::Kernel {
 public:
  static constexpr int64_t kGates = kKind == RnnKind::kRnn ? 1 : (kKind == RnnKind::kGru ? 3 : 4);
  static constexpr size_t kActsPerDir = kKind == RnnKind::kRnn ? 1 : (kKind == RnnKind::kGru ? 2 : 3);

  Status init(const ep::KernelInfo& info) {
    isa_ = info.isa();
    op_type_ = info.op_type();
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

  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    NXRT_ASSIGN_OR_RETURN(std::unique_ptr<RnnVariant> v, make_variant(InputFacts::of(sc), sc.num_threads()));
    return std::unique_ptr<ep::KernelVariant>(std::move(v));
  }

  Status compute(ep::KernelContext& ctx) const override {
    std::unique_ptr<RnnVariant> own;
    NXRT_ASSIGN_OR_RETURN(const RnnVariant* v,
                          variant_or_make<RnnVariant>(ctx, &own, [&](const InputFacts& in, int threads) {
                            return make_variant(in, threads);
                          }));
    const DataType dt = v->in.dtypes[0];
    return dispatch_float(
        dt,
        [&](auto tag) {
          using T = decltype(tag);
          using CT = std::conditional_t<std::is_same_v<T, double>, double, float>;
          return run<T, CT>(ctx, *v);
        },
        [&] { return ctx.error(op_type_ + " does not support dtype " + dtype_name(dt)); });
  }

 private:
  // Everything compute needs that follows from the inputs' dtypes and shapes; the errors a wrong shape
  // gets (they name no node: the executor, or compute through ctx.error, adds it).
  Result<std::unique_ptr<RnnVariant>> make_variant(const InputFacts& in, int threads) const {
    if (!in.has(0)) return variant_error("missing input X");
    if (!in.has(1) || !in.has(2)) return variant_error("missing input W or R");
    const DataType dt = in.dtypes[0];
    const bool dbl = dt == DataType::kDouble;
    if (dt != DataType::kFloat && !dbl && dt != DataType::kFloat16 && dt != DataType::kBFloat16) {
      return variant_error(op_type_ + " does not support dtype " + dtype_name(dt));
    }
    auto describe = [&](size_t i) { return std::string(dtype_name(in.dtypes[i])) + shape_to_string(in.shape(i)); };
    const Dims& xs = in.shape(0);
    const Dims& ws = in.shape(1);
    if (xs.size() != 3) return variant_error("X must be 3-D, got " + describe(0));
    auto v = std::make_unique<RnnVariant>();
    v->in = in;
    const int64_t S = layout_ == 0 ? xs[0] : xs[1];
    const int64_t Bn = layout_ == 0 ? xs[1] : xs[0];
    const int64_t I = xs[2];
    const int64_t D = dirs_;
    int64_t Hd = hidden_;
    if (Hd <= 0 && ws.size() == 3) Hd = ws[1] / kGates;
    const int64_t GH = kGates * Hd;
    if (in.dtypes[1] != dt || in.dtypes[2] != dt) return variant_error("W and R must have X's dtype");
    if (ws != Dims{D, GH, I}) {
      return variant_error("W " + describe(1) + " must have shape " + shape_to_string({D, GH, I}));
    }
    if (in.shape(2) != Dims{D, GH, Hd}) {
      return variant_error("R " + describe(2) + " must have shape " + shape_to_string({D, GH, Hd}));
    }
    if (in.has(3) && (in.dtypes[3] != dt || in.shape(3) != Dims{D, 2 * GH})) {
      return variant_error("B " + describe(3) + " must have shape " + shape_to_string({D, 2 * GH}));
    }
    v->state_shape = layout_ == 0 ? Dims{D, Bn, Hd} : Dims{Bn, D, Hd};
    for (size_t i : {size_t{5}, size_t{6}}) {
      if (i == 6 && kKind != RnnKind::kLstm) continue;
      if (in.has(i) && (in.dtypes[i] != dt || in.shape(i) != v->state_shape)) {
        return variant_error("initial state " + describe(i) + " must have shape " + shape_to_string(v->state_shape));
      }
    }
    if (kKind == RnnKind::kLstm && in.has(7) && (in.dtypes[7] != dt || in.shape(7) != Dims{D, 3 * Hd})) {
      return variant_error("P " + describe(7) + " must have shape " + shape_to_string({D, 3 * Hd}));
    }
    if (in.has(4) && shape_numel(in.shape(4)) != Bn) return variant_error("sequence_lens must have batch_size values");
    v->S = S;
    v->Bn = Bn;
    v->I = I;
    v->D = D;
    v->Hd = Hd;
    v->GH = GH;
    v->step_cols = (kKind == RnnKind::kGru && !linear_before_reset_) ? 2 * Hd : GH;
    v->x_in_place = dt == DataType::kFloat && layout_ == 0;

    const int64_t ct = dbl ? int64_t{sizeof(double)} : int64_t{sizeof(float)};
    auto add_ct = [&](int64_t n) { return v->scratch.add<unsigned char>(n * ct); };
    if (!v->x_in_place) v->x = add_ct(S * Bn * I);
    if (dt != DataType::kFloat && !dbl) {
      v->w_conv = add_ct(D * GH * I);
      v->r_conv = add_ct(D * GH * Hd);
    }
    v->bias = add_ct(D * 2 * GH);
    v->peep = add_ct(D * 3 * Hd);
    v->y = add_ct(S * D * Bn * Hd);
    v->yh = add_ct(D * Bn * Hd);
    v->yc = add_ct(D * Bn * Hd);
    v->xw = add_ct(S * Bn * GH);
    v->hr = add_ct(Bn * GH);
    v->h = add_ct(Bn * Hd);
    v->c = add_ct(Bn * Hd);
    v->gate = add_ct(GH);
    v->rh = add_ct(Bn * Hd);
    v->lens = v->scratch.add<int64_t>(Bn);
    if (!dbl) {
      v->proj_plan = gemm_f32_plan(S * Bn, GH, I, GemmA::kRaw, GemmB::kRaw, false, true, std::max(1, threads), isa_);
      // The steps run on the calling thread (no pool): a width-1 plan, slot 0 of the scratch.
      v->step_plan = gemm_f32_plan(Bn, v->step_cols, Hd, GemmA::kRaw, GemmB::kRaw, false, true, 1, isa_);
      v->gemm.reserve(v->scratch, std::max(v->proj_plan.scratch_floats, v->step_plan.scratch_floats), threads);
    }
    return v;
  }

  template <typename T, typename CT>
  Status run(ep::KernelContext& ctx, const RnnVariant& v) const {
    const Tensor& X = ctx.input(0);
    const Tensor& W = ctx.input(1);
    const Tensor& R = ctx.input(2);
    auto opt = [&](size_t i) -> const Tensor* { return ctx.has_input(i) ? &ctx.input(i) : nullptr; };
    const Tensor* Bt = opt(3);
    const Tensor* SL = opt(4);
    const Tensor* H0 = opt(5);
    const Tensor* C0 = kKind == RnnKind::kLstm ? opt(6) : nullptr;
    const Tensor* P = kKind == RnnKind::kLstm ? opt(7) : nullptr;
    const int64_t S = v.S, Bn = v.Bn, I = v.I, D = v.D, Hd = v.Hd, GH = v.GH;
    NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, v));
    ScratchLayout scratch = v.scratch;
    scratch.bind(ws);
    int64_t* lens = scratch.at<int64_t>(v.lens);
    std::fill(lens, lens + Bn, S);
    if (SL) {
      if (SL->dtype() == DataType::kInt32) {
        for (int64_t b = 0; b < Bn; ++b) lens[b] = SL->data<int32_t>()[b];
      } else if (SL->dtype() == DataType::kInt64) {
        for (int64_t b = 0; b < Bn; ++b) lens[b] = SL->data<int64_t>()[b];
      } else {
        NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> read, read_int_values(*SL));
        std::copy(read.begin(), read.end(), lens);
      }
      for (int64_t b = 0; b < Bn; ++b)
        if (lens[b] < 0 || lens[b] > S)
          return ctx.error("sequence_lens value " + std::to_string(lens[b]) + " outside [0, " + std::to_string(S) + "]");
    }
    const GemmScratch gs = v.gemm.scratch(scratch);

    // Inputs in compute type, time-major (float X in layout 0 already is: read in place).
    const CT* x = nullptr;
    if constexpr (std::is_same_v<T, CT>) {
      if (v.x_in_place) x = X.data<CT>();
    }
    if (!x) {
      CT* xt = scratch.at<CT>(v.x);
      const T* xs = X.data<T>();
      for (int64_t t = 0; t < S; ++t)
        for (int64_t b = 0; b < Bn; ++b) {
          const T* src = layout_ == 0 ? xs + (t * Bn + b) * I : xs + (b * S + t) * I;
          convert_buffer<T, CT>(src, xt + (t * Bn + b) * I, I);
        }
      x = xt;
    }
    // Float and double weights are used where they are (a 128-unit LSTM's W and R are 512 KB: copying
    // them on every call cost more than the recurrence itself); float16/bfloat16 ones are converted.
    const CT* w_ptr = nullptr;
    const CT* r_ptr = nullptr;
    if constexpr (std::is_same_v<T, CT>) {
      w_ptr = W.data<T>();
      r_ptr = R.data<T>();
    } else {
      CT* wc = scratch.at<CT>(v.w_conv);
      CT* rc = scratch.at<CT>(v.r_conv);
      convert_buffer<T, CT>(W.data<T>(), wc, W.numel());
      convert_buffer<T, CT>(R.data<T>(), rc, R.numel());
      w_ptr = wc;
      r_ptr = rc;
    }
    CT* bias = scratch.at<CT>(v.bias);
    if (Bt) {
      convert_buffer<T, CT>(Bt->data<T>(), bias, D * 2 * GH);
    } else {
      std::fill(bias, bias + D * 2 * GH, CT(0));
    }
    CT* peep = scratch.at<CT>(v.peep);
    if (P) {
      convert_buffer<T, CT>(P->data<T>(), peep, D * 3 * Hd);
    } else {
      std::fill(peep, peep + D * 3 * Hd, CT(0));
    }
    auto state_in = [&](const Tensor* st, int64_t d, CT* out) {
      std::fill(out, out + Bn * Hd, CT(0));
      if (!st) return;
      const T* s = st->data<T>();
      for (int64_t b = 0; b < Bn; ++b) {
        const T* src = layout_ == 0 ? s + (d * Bn + b) * Hd : s + (b * D + d) * Hd;
        convert_buffer<T, CT>(src, out + b * Hd, Hd);
      }
    };

    CT* y = scratch.at<CT>(v.y);  // [S, D, B, H]
    std::fill(y, y + S * D * Bn * Hd, CT(0));
    CT* yh = scratch.at<CT>(v.yh);
    CT* yc = scratch.at<CT>(v.yc);
    CT* xw = scratch.at<CT>(v.xw);
    CT* hr = scratch.at<CT>(v.hr);
    CT* h = scratch.at<CT>(v.h);
    CT* c = scratch.at<CT>(v.c);
    CT* gate = scratch.at<CT>(v.gate);
    CT* rh = scratch.at<CT>(v.rh);
    ep::ThreadPool* pool = &ctx.pool();

    for (int64_t d = 0; d < D; ++d) {
      const bool reverse = reverse_only_ || d == 1;
      const CT* wd = w_ptr + d * GH * I;
      const CT* rd = r_ptr + d * GH * Hd;
      const CT* wb = bias + d * 2 * GH;
      const CT* rb = wb + GH;
      const CT* pd = peep + d * 3 * Hd;
      const RnnActivation* act = acts_.data() + d * kActsPerDir;
      // xw = X * W^T + Wb + Rb (GRU with linear_before_reset keeps Rb of the h gate for later).
      if constexpr (std::is_same_v<CT, float>) {
        gemm_f32(v.proj_plan, 1.f, x, I, wd, I, 0.f, xw, GH, pool, nullptr, &gs);
      } else {
        gemm<CT>(false, true, S * Bn, GH, I, CT(1), x, I, wd, I, CT(0), xw, GH, pool, isa_);
      }
      for (int64_t row = 0; row < S * Bn; ++row) {
        CT* p = xw + row * GH;
        for (int64_t j = 0; j < GH; ++j) {
          const bool keep_rb = kKind == RnnKind::kGru && linear_before_reset_ && j >= 2 * Hd;
          p[j] += wb[j] + (keep_rb ? CT(0) : rb[j]);
        }
      }
      state_in(H0, d, h);
      if constexpr (kKind == RnnKind::kLstm) state_in(C0, d, c);

      for (int64_t s = 0; s < S; ++s) {
        // hr = H * R^T; for GRU without linear_before_reset only the z and r gates here.
        if constexpr (std::is_same_v<CT, float>) {
          gemm_f32(v.step_plan, 1.f, h, Hd, rd, Hd, 0.f, hr, GH, nullptr, nullptr, &gs);
        } else {
          gemm<CT>(false, true, Bn, v.step_cols, Hd, CT(1), h, Hd, rd, Hd, CT(0), hr, GH, nullptr, isa_);
        }
        for (int64_t b = 0; b < Bn; ++b) {
          if (s >= lens[b]) continue;
          const int64_t t = reverse ? lens[b] - 1 - s : s;
          const CT* xg = xw + (t * Bn + b) * GH;
          const CT* hg = hr + b * GH;
          CT* hb = h + b * Hd;
          CT* cb = kKind == RnnKind::kLstm ? c + b * Hd : nullptr;
          cell<CT>(xg, hg, hb, cb, gate, rh + b * Hd, rd, rb, pd, act, Hd);
          std::copy(hb, hb + Hd, y + ((t * D + d) * Bn + b) * Hd);
        }
      }
      std::copy(h, h + Bn * Hd, yh + d * Bn * Hd);
      if constexpr (kKind == RnnKind::kLstm) std::copy(c, c + Bn * Hd, yc + d * Bn * Hd);
    }

    return write_outputs<T, CT>(ctx, X.dtype(), S, D, Bn, Hd, v.state_shape, y, yh, yc);
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
                       const Dims& state_shape, const CT* y, const CT* yh, const CT* yc) const {
    // Outputs in the requested layout.
    if (ctx.num_outputs() > 0 && ctx.output_requested(0)) {
      const Dims ys = layout_ == 0 ? Dims{S, D, Bn, Hd} : Dims{Bn, S, D, Hd};
      NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, dt, ys));
      T* yo = Y->data<T>();
      for (int64_t t = 0; t < S; ++t)
        for (int64_t d = 0; d < D; ++d)
          for (int64_t b = 0; b < Bn; ++b) {
            const CT* src = y + ((t * D + d) * Bn + b) * Hd;
            T* dst = layout_ == 0 ? yo + ((t * D + d) * Bn + b) * Hd : yo + ((b * S + t) * D + d) * Hd;
            for (int64_t j = 0; j < Hd; ++j) dst[j] = from_ct<T>(src[j]);
          }
    }
    auto write_state = [&](size_t idx, const CT* st) -> Status {
      if (idx >= ctx.num_outputs() || !ctx.output_requested(idx)) return Status::Ok();
      NXRT_ASSIGN_OR_RETURN(Tensor * O, ctx.allocate_output(idx, dt, state_shape));
      T* o = O->data<T>();
      for (int64_t d = 0; d < D; ++d)
        for (int64_t b = 0; b < Bn; ++b) {
          const CT* src = st + (d * Bn + b) * Hd;
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
  std::string op_type_;
  ep::IsaTier isa_ = ep::cpu_isa_tier();
};

}  // namespace

void register_rnn_kernels(ep::KernelRegistry& r) {
  r.add_class<RnnKernel<RnnKind::kRnn>>("", "RNN", 1);
  r.add_class<RnnKernel<RnnKind::kGru>>("", "GRU", 1);
  r.add_class<RnnKernel<RnnKind::kLstm>>("", "LSTM", 1);
}

}  // namespace nxrt::ops
