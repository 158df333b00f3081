// Signal ops: DFT (opset 17, 20), STFT (17), BlackmanWindow, HammingWindow, HannWindow (17),
// MelWeightMatrix (17). All transforms compute in double (src/ops/signal/fft.h) and round once to the
// output type.
#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "ep/thread_pool.h"
#include "ops/common.h"
#include "ops/signal/fft.h"

namespace nxrt::ops {
namespace {

using fft::cd;

constexpr int64_t kMaxDftLength = int64_t{1} << 30;


// A scalar (or one-element) integer input.
Result<int64_t> scalar_int(ep::KernelContext& ctx, size_t i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (t.dtype() != DataType::kInt32 && t.dtype() != DataType::kInt64) {
    return ctx.error(std::string(what) + " must be int32 or int64, got " + t.describe(), StatusCode::kInvalidArgument);
  }
  if (t.numel() != 1) {
    return ctx.error(std::string(what) + " must be a scalar, got " + t.describe(), StatusCode::kInvalidArgument);
  }
  return t.dtype() == DataType::kInt32 ? static_cast<int64_t>(t.data<int32_t>()[0]) : t.data<int64_t>()[0];
}

Result<double> scalar_float(ep::KernelContext& ctx, size_t i, const char* what) {
  const Tensor& t = ctx.input(i);
  if (!dtype_is_float(t.dtype()) || t.numel() != 1) {
    return ctx.error(std::string(what) + " must be a float scalar, got " + t.describe(), StatusCode::kInvalidArgument);
  }
  auto v = read_double_values(t);
  if (!v.ok()) return ctx.error(v.status().message(), StatusCode::kInvalidArgument);
  return v.value()[0];
}

// ---------------------------------------------------------------------------------------------
// DFT

struct DftJob {
  int64_t in_len = 0;   // input length along the axis
  int64_t inner = 1;    // product of the dims between the axis and the complex dim
  int64_t cin = 1;      // 1 real, 2 complex
  int64_t n = 0;        // transform length
  int64_t out_len = 0;  // output length along the axis
  int64_t cout = 2;
  bool inverse = false;
  bool onesided = false;
  int64_t axis = 0;     // the signal axis
};

// The per-shape state of DFT and STFT (their kernel-cache variant): the FFT plans of one transform
// length and the work split. Lines (DFT) or frames (STFT) are cut into `chunks` fixed ranges, each
// with its own slice of the workspace the variant declares (the line buffer, the real input, the
// plans' scratch), so compute allocates nothing. Built from the input shapes and constant inputs;
// when the length arrives at run time (a dft_length computed by the graph) compute builds one per
// call.
class FftVariant final : public ep::KernelVariant {
 public:
  FftVariant(int64_t n, bool complex_plan, bool real_plan, int64_t items, int64_t grain) : n_(n) {
    if (complex_plan) plan_ = std::make_unique<fft::Plan>(n);
    if (real_plan) rplan_ = std::make_unique<fft::RealPlan>(n);
    constexpr int64_t kMaxChunks = 32;  // enough for the pool; each chunk owns a workspace slice
    chunks_ = std::max<int64_t>(1, std::min<int64_t>(kMaxChunks, items / std::max<int64_t>(1, grain)));
    items_ = items;
    const size_t scratch = std::max(plan_ ? plan_->scratch_size() : 0, rplan_ ? rplan_->scratch_size() : 0);
    chunk_bytes_ = round_up((static_cast<size_t>(n) + scratch) * sizeof(cd) + static_cast<size_t>(n) * sizeof(double));
  }
  size_t workspace_bytes() const override { return static_cast<size_t>(chunks_) * chunk_bytes_; }
  // Whether it was built for this job (the length and plans a run needs).
  bool serves(int64_t n, bool complex_plan, bool real_plan, int64_t items) const {
    return n == n_ && items == items_ && (!complex_plan || plan_) && (!real_plan || rplan_);
  }
  const fft::Plan& plan() const { return *plan_; }
  const fft::RealPlan* real_plan() const { return rplan_.get(); }
  int64_t chunks() const { return chunks_; }
  int64_t chunk_begin(int64_t c) const { return c * items_ / chunks_; }
  struct Scratch {
    cd* line;     // n values
    cd* plan;     // the plans' scratch
    double* real; // n values
  };
  // fn(scratch, begin, end) for every chunk, chunks spread over the pool.
  template <typename Fn>
  void for_each_chunk(ep::ThreadPool& pool, void* ws, Fn fn) const {
    pool.parallel_for(chunks_, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) fn(scratch(ws, c), chunk_begin(c), chunk_begin(c + 1));
    });
  }
  Scratch scratch(void* ws, int64_t c) const {
    char* base = static_cast<char*>(ws) + static_cast<size_t>(c) * chunk_bytes_;
    const size_t scratch = std::max(plan_ ? plan_->scratch_size() : 0, rplan_ ? rplan_->scratch_size() : 0);
    cd* line = reinterpret_cast<cd*>(base);
    return {line, line + n_, reinterpret_cast<double*>(line + n_ + static_cast<int64_t>(scratch))};
  }

 private:
  static size_t round_up(size_t b) { return (b + 63) / 64 * 64; }
  int64_t n_ = 0, items_ = 0, chunks_ = 1;
  size_t chunk_bytes_ = 0;
  std::unique_ptr<fft::Plan> plan_;
  std::unique_ptr<fft::RealPlan> rplan_;
};

// The cache's variant when it was built for this job, else one made now into `local` (a length known
// only at run time, or a context without a kernel cache).
template <typename Make>
const FftVariant& cached_or_local(const ep::KernelContext& ctx, std::unique_ptr<FftVariant>& local, int64_t n,
                                  bool complex_plan, bool real_plan, int64_t items, Make make) {
  const auto* cached = dynamic_cast<const FftVariant*>(ctx.variant());
  if (cached && cached->serves(n, complex_plan, real_plan, items)) return *cached;
  local.reset(make());
  return *local;
}

// The value of constant scalar input i (int32/int64), when it is a constant.
std::optional<int64_t> const_scalar(const ep::KernelInfo& info, size_t i) {
  const Tensor* t = info.const_input(i);
  if (!t || t->numel() != 1) return std::nullopt;
  if (t->dtype() == DataType::kInt64) return t->data<int64_t>()[0];
  if (t->dtype() == DataType::kInt32) return t->data<int32_t>()[0];
  return std::nullopt;
}

// Transforms lines [begin, end) of a [outer, in_len, inner, cin] input into [outer, out_len, inner, cout].
template <typename T>
void dft_lines(const T* in, T* out, const DftJob& j, const FftVariant& v, FftVariant::Scratch sc, int64_t begin,
               int64_t end) {
  const int64_t n = j.n;
  cd* buf = sc.line;
  const int64_t in_step = j.inner * j.cin;
  const int64_t out_step = j.inner * j.cout;
  const bool irfft = j.inverse && j.onesided;
  const fft::RealPlan* rplan = v.real_plan();
  const bool real_fwd = !j.inverse && j.cin == 1 && rplan != nullptr;
  const int64_t copy = std::min(j.in_len, irfft ? n / 2 + 1 : n);
  if (real_fwd) std::fill(sc.real, sc.real + n, 0.0);
  for (int64_t line = begin; line < end; ++line) {
    const int64_t o = line / j.inner, i = line % j.inner;
    const T* src = in + (o * j.in_len * j.inner + i) * j.cin;
    T* dst = out + (o * j.out_len * j.inner + i) * j.cout;
    if (real_fwd) {
      for (int64_t k = 0; k < copy; ++k) sc.real[k] = to_compute<double>(src[k * in_step]);
      rplan->forward(sc.real, buf, sc.plan);
      if (!j.onesided) {
        for (int64_t k = n / 2 + 1; k < n; ++k) buf[k] = std::conj(buf[n - k]);
      }
    } else {
      std::fill(buf, buf + n, cd(0, 0));
      if (j.cin == 2) {
        for (int64_t k = 0; k < copy; ++k) buf[k] = cd(to_compute<double>(src[k * in_step]), to_compute<double>(src[k * in_step + 1]));
      } else {
        for (int64_t k = 0; k < copy; ++k) buf[k] = cd(to_compute<double>(src[k * in_step]), 0.0);
      }
      if (irfft) {
        // Hermitian extension of the one-sided spectrum; the real part of the inverse drops the
        // imaginary parts of bins 0 and n/2 as numpy's irfft does.
        for (int64_t k = n / 2 + 1; k < n; ++k) buf[k] = (n - k) < copy ? std::conj(buf[n - k]) : cd(0, 0);
      }
      v.plan().transform(buf, j.inverse, sc.plan);
    }
    const double scale = j.inverse ? 1.0 / static_cast<double>(n) : 1.0;
    if (j.cout == 1) {
      for (int64_t k = 0; k < j.out_len; ++k) dst[k * out_step] = from_compute<T>(buf[k].real() * scale);
    } else {
      for (int64_t k = 0; k < j.out_len; ++k) {
        dst[k * out_step] = from_compute<T>(buf[k].real() * scale);
        dst[k * out_step + 1] = from_compute<T>(buf[k].imag() * scale);
      }
    }
  }
}

// The DFT geometry of an input shape: axis, lengths, line counts. `axis_value`/`length_value` are the
// axis and dft_length inputs when given (else the defaults). Errors name the input.
Result<DftJob> dft_job(const ep::KernelInfo& info, const Dims& x, std::optional<int64_t> axis_value,
                       std::optional<int64_t> length_value, int64_t* lines) {
  const int64_t r = static_cast<int64_t>(x.size());
  if (r < 2) return invalid_argument("input must have rank >= 2 (signal dims + a complex dim), got " + shape_to_string(x));
  const int64_t cin = x[r - 1];
  if (cin != 1 && cin != 2) return invalid_argument("the last input dim must be 1 (real) or 2 (complex), got " + shape_to_string(x));
  int64_t axis = info.opset() >= 20 ? axis_value.value_or(-2) : info.attr_int("axis", 1);
  const int64_t axis_in = axis;
  if (!normalize_axis(&axis, r) || axis == r - 1) {
    return invalid_argument("axis " + std::to_string(axis_in) + " is out of range for input " + shape_to_string(x) +
                            " (accepted: [-r, -2] or [0, r-2]; the last dim holds the complex parts)");
  }
  DftJob j;
  j.inverse = info.attr_int("inverse", 0) != 0;
  j.onesided = info.attr_int("onesided", 0) != 0;
  j.cin = cin;
  j.in_len = x[axis];
  j.axis = axis;
  const bool irfft = j.inverse && j.onesided;
  if (length_value) {
    j.n = *length_value;
    if (j.n <= 0) return invalid_argument("dft_length must be positive, got " + std::to_string(j.n));
  } else {
    j.n = irfft ? 2 * (j.in_len - 1) : j.in_len;
    if (j.n <= 0) {
      return invalid_argument("the signal axis of " + shape_to_string(x) + " gives a transform length of " +
                              std::to_string(j.n));
    }
  }
  if (j.n > kMaxDftLength) return invalid_argument("dft_length " + std::to_string(j.n) + " is too large");
  j.out_len = irfft ? j.n : (j.onesided ? j.n / 2 + 1 : j.n);
  j.cout = irfft ? 1 : 2;
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x[d];
  for (int64_t d = axis + 1; d < r - 1; ++d) j.inner *= x[d];
  *lines = outer * j.inner;
  return j;
}

int64_t dft_grain(int64_t n) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n)); }

class DftKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo&) { return Status::Ok(); }

  // Plans for the transform length when the shapes and constant inputs decide it.
  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    const ep::KernelInfo& info = sc.info();
    std::optional<int64_t> axis, length;
    if (info.opset() >= 20 && sc.has_input(2)) {
      if (!(axis = const_scalar(info, 2))) return std::unique_ptr<ep::KernelVariant>();
    }
    if (sc.has_input(1)) {
      if (!(length = const_scalar(info, 1))) return std::unique_ptr<ep::KernelVariant>();
    }
    int64_t lines = 0;
    auto j = dft_job(info, sc.shape(0), axis, length, &lines);
    if (!j.ok()) return std::unique_ptr<ep::KernelVariant>();  // compute reports it with the inputs
    return std::unique_ptr<ep::KernelVariant>(make(j.value(), lines));
  }

  Status compute(ep::KernelContext& ctx) const override {
    const auto& info = ctx.info();
    const Tensor& x = ctx.input(0);
    std::optional<int64_t> axis, length;
    if (info.opset() >= 20 && ctx.has_input(2)) {
      NXRT_ASSIGN_OR_RETURN(int64_t a, scalar_int(ctx, 2, "axis"));
      axis = a;
    }
    if (ctx.has_input(1)) {
      NXRT_ASSIGN_OR_RETURN(int64_t n, scalar_int(ctx, 1, "dft_length"));
      length = n;
    }
    int64_t lines = 0;
    auto jr = dft_job(info, x.shape(), axis, length, &lines);
    if (!jr.ok()) return ctx.error(jr.status().message(), StatusCode::kInvalidArgument);
    const DftJob& j = jr.value();
    Dims out_shape = x.shape();
    out_shape[j.axis] = j.out_len;
    out_shape[x.rank() - 1] = j.cout;
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_shape));
    if (lines == 0) return Status::Ok();
    std::unique_ptr<FftVariant> local;
    const FftVariant& v = cached_or_local(ctx, local, j.n, true, real_forward(j), lines, [&] { return make(j, lines); });
    NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, v));
    return dispatch_float(
        x.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          const T* in = x.data<T>();
          T* out = y->data<T>();
          v.for_each_chunk(ctx.pool(), ws, [&](FftVariant::Scratch sc, int64_t b, int64_t e) { dft_lines<T>(in, out, j, v, sc, b, e); });
          return Status::Ok();
        },
        [&] { return ctx.error("input must be float16, bfloat16, float or double, got " + x.describe(), StatusCode::kInvalidArgument); });
  }

 private:
  static bool real_forward(const DftJob& j) { return !j.inverse && j.cin == 1; }
  static FftVariant* make(const DftJob& j, int64_t lines) {
    return new FftVariant(j.n, true, real_forward(j), lines, dft_grain(j.n));
  }
};

// ---------------------------------------------------------------------------------------------
// STFT

struct StftJob {
  int64_t batch = 0, len = 0, cin = 1, step = 0, fl = 0, frames = 0, bins = 0;
  int64_t wlen = 0;  // window samples used (the window may be shorter or longer than a frame)
  bool onesided = true;
};

// The STFT geometry: frame_length from its input, else the window's length, else the signal's.
Result<StftJob> stft_job(const ep::KernelInfo& info, const Dims& x, int64_t step, const Dims* window,
                         std::optional<int64_t> frame_length) {
  if (x.size() != 3 || (x[2] != 1 && x[2] != 2)) {
    return invalid_argument("signal must be [batch, length, 1 or 2], got " + shape_to_string(x));
  }
  StftJob j;
  j.batch = x[0], j.len = x[1], j.cin = x[2], j.step = step;
  if (step <= 0) return invalid_argument("frame_step must be positive, got " + std::to_string(step));
  if (window && window->size() != 1) return invalid_argument("window must be 1-D, got " + shape_to_string(*window));
  j.fl = frame_length ? *frame_length : window ? (*window)[0] : j.len;
  if (j.fl <= 0 || j.fl > kMaxDftLength) {
    return invalid_argument("frame_length must be in [1, 2^30], got " + std::to_string(j.fl));
  }
  if (j.len < j.fl) {
    return invalid_argument("signal length " + std::to_string(j.len) + " is shorter than frame_length " +
                            std::to_string(j.fl));
  }
  j.wlen = window ? std::min<int64_t>((*window)[0], j.fl) : j.fl;
  j.frames = 1 + (j.len - j.fl) / step;
  j.onesided = info.attr_int("onesided", 1) != 0;
  j.bins = j.onesided ? j.fl / 2 + 1 : j.fl;
  return j;
}

class StftKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo&) { return Status::Ok(); }

  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    const ep::KernelInfo& info = sc.info();
    const std::optional<int64_t> step = const_scalar(info, 1);
    std::optional<int64_t> fl;
    if (!step || (sc.has_input(3) && !(fl = const_scalar(info, 3)))) return std::unique_ptr<ep::KernelVariant>();
    auto j = stft_job(info, sc.shape(0), *step, sc.has_input(2) ? &sc.shape(2) : nullptr, fl);
    if (!j.ok()) return std::unique_ptr<ep::KernelVariant>();
    return std::unique_ptr<ep::KernelVariant>(make(j.value()));
  }

  Status compute(ep::KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    NXRT_ASSIGN_OR_RETURN(int64_t step, scalar_int(ctx, 1, "frame_step"));
    const bool has_window = ctx.has_input(2);
    if (has_window) {
      const Tensor& w = ctx.input(2);
      if (w.dtype() != x.dtype()) {
        return ctx.error("window dtype must match the signal: " + w.describe() + " vs " + x.describe(), StatusCode::kInvalidArgument);
      }
    }
    std::optional<int64_t> fl_in;
    if (ctx.has_input(3)) {
      NXRT_ASSIGN_OR_RETURN(int64_t fl, scalar_int(ctx, 3, "frame_length"));
      fl_in = fl;
    }
    auto jr = stft_job(ctx.info(), x.shape(), step, has_window ? &ctx.input(2).shape() : nullptr, fl_in);
    if (!jr.ok()) return ctx.error(jr.status().message(), StatusCode::kInvalidArgument);
    const StftJob& j = jr.value();
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), {j.batch, j.frames, j.bins, 2}));
    std::unique_ptr<FftVariant> local;
    const FftVariant& v =
        cached_or_local(ctx, local, j.fl, j.cin == 2, j.cin == 1, j.batch * j.frames, [&] { return make(j); });
    NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, v));
    return dispatch_float(
        x.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          const T* in = x.data<T>();
          const T* win = has_window ? ctx.input(2).data<T>() : nullptr;
          T* out = y->data<T>();
          v.for_each_chunk(ctx.pool(), ws, [&](FftVariant::Scratch sc, int64_t b, int64_t e) { stft_frames<T>(in, win, out, j, v, sc, b, e); });
          return Status::Ok();
        },
        [&] { return ctx.error("signal must be float16, bfloat16, float or double, got " + x.describe(), StatusCode::kInvalidArgument); });
  }

 private:
  static FftVariant* make(const StftJob& j) {
    return new FftVariant(j.fl, j.cin == 2, j.cin == 1, j.batch * j.frames, std::max<int64_t>(1, 16384 / j.fl));
  }

  // Frames [b0, e0) of all batches (t = b * frames + f), windowed and transformed.
  template <typename T>
  static void stft_frames(const T* in, const T* win, T* out, const StftJob& j, const FftVariant& v,
                          FftVariant::Scratch sc, int64_t b0, int64_t e0) {
    const int64_t fl = j.fl;
    const int64_t wlen = j.wlen;
    cd* buf = sc.line;
    for (int64_t t = b0; t < e0; ++t) {
      const int64_t b = t / j.frames, f = t % j.frames;
      const int64_t begin = f * j.step;
      const int64_t avail = std::min(wlen, j.len - begin);  // samples inside the signal
      const T* src = in + (b * j.len + begin) * j.cin;
      auto w = [&](int64_t k) { return win ? to_compute<double>(win[k]) : 1.0; };
      if (j.cin == 1) {
        for (int64_t k = 0; k < avail; ++k) sc.real[k] = to_compute<double>(src[k]) * w(k);
        for (int64_t k = avail; k < fl; ++k) sc.real[k] = 0.0;
        v.real_plan()->forward(sc.real, buf, sc.plan);
        if (!j.onesided) {
          for (int64_t k = fl / 2 + 1; k < fl; ++k) buf[k] = std::conj(buf[fl - k]);
        }
      } else {
        for (int64_t k = 0; k < avail; ++k) buf[k] = cd(to_compute<double>(src[2 * k]), to_compute<double>(src[2 * k + 1])) * w(k);
        for (int64_t k = avail; k < fl; ++k) buf[k] = cd(0, 0);
        v.plan().transform(buf, false, sc.plan);
      }
      T* dst = out + t * j.bins * 2;
      for (int64_t k = 0; k < j.bins; ++k) {
        dst[2 * k] = from_compute<T>(buf[k].real());
        dst[2 * k + 1] = from_compute<T>(buf[k].imag());
      }
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Windows

Status output_numeric_type(ep::KernelContext& ctx, DataType* out) {
  int64_t dt = ctx.info().attr_int("output_datatype", static_cast<int64_t>(DataType::kFloat));
  DataType d = static_cast<DataType>(dt);
  bool ok = is_known_dtype(static_cast<int32_t>(dt)) &&
            (d == DataType::kFloat || d == DataType::kDouble || d == DataType::kFloat16 || d == DataType::kBFloat16 ||
             d == DataType::kInt8 || d == DataType::kInt16 || d == DataType::kInt32 || d == DataType::kInt64 ||
             d == DataType::kUInt8 || d == DataType::kUInt16 || d == DataType::kUInt32 || d == DataType::kUInt64);
  if (!ok) {
    return ctx.error("output_datatype " + std::to_string(dt) + " is not a supported numeric type", StatusCode::kInvalidModel);
  }
  *out = d;
  return Status::Ok();
}

Status write_values(ep::KernelContext& ctx, DataType dt, const Dims& shape, const std::vector<double>& v) {
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, shape));
  return dispatch_numeric(
      dt,
      [&](auto tag) {
        using T = decltype(tag);
        T* out = y->data<T>();
        for (size_t i = 0; i < v.size(); ++i) {
          if constexpr (std::is_integral_v<T>) {
            out[i] = static_cast<T>(static_cast<int64_t>(v[i]));  // values lie in [-1, 1]: truncates like numpy
          } else {
            out[i] = from_compute<T>(v[i]);
          }
        }
        return Status::Ok();
      },
      [&] { return ctx.error("unsupported output dtype"); });
}

enum class WindowKind { kHann, kHamming, kBlackman };

template <WindowKind K>
Status window_compute(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(int64_t size, scalar_int(ctx, 0, "size"));
  if (size < 0 || size > kMaxDftLength) {
    return ctx.error("window size must be in [0, 2^30], got " + std::to_string(size), StatusCode::kInvalidArgument);
  }
  DataType dt;
  NXRT_RETURN_IF_ERROR(output_numeric_type(ctx, &dt));
  const bool periodic = ctx.info().attr_int("periodic", 1) != 0;
  const int64_t denom = periodic ? size : size - 1;
  std::vector<double> v(static_cast<size_t>(size));
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  for (int64_t i = 0; i < size; ++i) {
    // A symmetric window of length 1 has no period: the single sample is the peak, 1.
    if (denom == 0) {
      v[i] = 1.0;
      continue;
    }
    const double a = kTwoPi * static_cast<double>(i) / static_cast<double>(denom);
    if constexpr (K == WindowKind::kHann) {
      v[i] = 0.5 - 0.5 * std::cos(a);
    } else if constexpr (K == WindowKind::kHamming) {
      v[i] = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(a);
    } else {
      v[i] = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2.0 * a);
    }
  }
  return write_values(ctx, dt, {size}, v);
}

// ---------------------------------------------------------------------------------------------
// MelWeightMatrix

Status mel_weight_matrix_compute(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(int64_t num_mel_bins, scalar_int(ctx, 0, "num_mel_bins"));
  NXRT_ASSIGN_OR_RETURN(int64_t dft_length, scalar_int(ctx, 1, "dft_length"));
  NXRT_ASSIGN_OR_RETURN(int64_t sample_rate, scalar_int(ctx, 2, "sample_rate"));
  NXRT_ASSIGN_OR_RETURN(double lower, scalar_float(ctx, 3, "lower_edge_hertz"));
  NXRT_ASSIGN_OR_RETURN(double upper, scalar_float(ctx, 4, "upper_edge_hertz"));
  if (num_mel_bins <= 0 || num_mel_bins > kMaxDftLength || dft_length <= 0 || dft_length > kMaxDftLength ||
      sample_rate <= 0) {
    return ctx.error("num_mel_bins (" + std::to_string(num_mel_bins) + "), dft_length (" + std::to_string(dft_length) +
                         ") and sample_rate (" + std::to_string(sample_rate) + ") must be positive",
                     StatusCode::kInvalidArgument);
  }
  if (!(lower >= 0.0) || !(upper >= lower) || !std::isfinite(upper)) {
    return ctx.error("need 0 <= lower_edge_hertz <= upper_edge_hertz, got " + std::to_string(lower) + " and " +
                         std::to_string(upper),
                     StatusCode::kInvalidArgument);
  }
  DataType dt;
  NXRT_RETURN_IF_ERROR(output_numeric_type(ctx, &dt));
  const int64_t spec_bins = dft_length / 2 + 1;
  // Triangular filters between num_mel_bins + 2 points spaced evenly on the mel scale, each mapped to a
  // spectrogram bin floor((dft_length + 1) * hz / sample_rate).
  const double low_mel = 2595.0 * std::log10(1.0 + lower / 700.0);
  const double high_mel = 2595.0 * std::log10(1.0 + upper / 700.0);
  const int64_t points = num_mel_bins + 2;
  const double mel_step = (high_mel - low_mel) / static_cast<double>(points);
  std::vector<int64_t> bin(static_cast<size_t>(points));
  for (int64_t i = 0; i < points; ++i) {
    const double mel = static_cast<double>(i) * mel_step + low_mel;
    const double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
    const double b = std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
    bin[i] = static_cast<int64_t>(std::clamp(b, -1.0, static_cast<double>(kMaxDftLength) * 4.0));
  }
  std::vector<double> w(static_cast<size_t>(spec_bins * num_mel_bins), 0.0);
  auto set = [&](int64_t row, int64_t col, double v) {
    if (row >= 0 && row < spec_bins) w[row * num_mel_bins + col] = v;
  };
  for (int64_t i = 0; i < num_mel_bins; ++i) {
    const int64_t lo = bin[i], center = bin[i + 1], hi = bin[i + 2];
    const int64_t up = center - lo;
    if (up == 0) {
      set(center, i, 1.0);
    } else {
      for (int64_t jj = std::max<int64_t>(lo, -1); jj <= std::min(center, spec_bins); ++jj) {
        set(jj, i, static_cast<double>(jj - lo) / static_cast<double>(up));
      }
    }
    const int64_t down = hi - center;
    if (down > 0) {
      for (int64_t jj = std::max<int64_t>(center, -1); jj < std::min(hi, spec_bins + 1); ++jj) {
        set(jj, i, static_cast<double>(hi - jj) / static_cast<double>(down));
      }
    }
  }
  return write_values(ctx, dt, {spec_bins, num_mel_bins}, w);
}

}  // namespace

void register_signal_ops(ep::KernelRegistry& r) {
  r.add_class<DftKernel>("", "DFT", 17);
  r.add_class<StftKernel>("", "STFT", 17);
  r.add_fn("", "HannWindow", 17, INT64_MAX, &window_compute<WindowKind::kHann>);
  r.add_fn("", "HammingWindow", 17, INT64_MAX, &window_compute<WindowKind::kHamming>);
  r.add_fn("", "BlackmanWindow", 17, INT64_MAX, &window_compute<WindowKind::kBlackman>);
  r.add_fn("", "MelWeightMatrix", 17, INT64_MAX, &mel_weight_matrix_compute);
}

}  // namespace nxrt::ops
