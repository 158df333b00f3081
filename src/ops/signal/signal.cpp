// Signal ops: DFT (opset 17, 20), STFT (17), BlackmanWindow, HammingWindow, HannWindow (17),
// MelWeightMatrix (17). All transforms compute in double (src/ops/signal/fft.h) and round once to the
// output type.
#include <algorithm>
#include <cmath>
#include <vector>

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
};

// Transforms lines [begin, end) of a [outer, in_len, inner, cin] input into [outer, out_len, inner, cout].
template <typename T>
void dft_lines(const T* in, T* out, const DftJob& j, const fft::Plan& plan, const fft::RealPlan* rplan, int64_t begin,
               int64_t end) {
  const int64_t n = j.n;
  std::vector<cd> buf(static_cast<size_t>(n)), s1, s2;
  std::vector<double> rbuf;
  const int64_t in_step = j.inner * j.cin;
  const int64_t out_step = j.inner * j.cout;
  const bool irfft = j.inverse && j.onesided;
  const bool real_fwd = !j.inverse && j.cin == 1 && rplan != nullptr;
  const int64_t copy = std::min(j.in_len, irfft ? n / 2 + 1 : n);
  if (real_fwd) rbuf.assign(static_cast<size_t>(n), 0.0);
  for (int64_t line = begin; line < end; ++line) {
    const int64_t o = line / j.inner, i = line % j.inner;
    const T* src = in + (o * j.in_len * j.inner + i) * j.cin;
    T* dst = out + (o * j.out_len * j.inner + i) * j.cout;
    if (real_fwd) {
      for (int64_t k = 0; k < copy; ++k) rbuf[k] = to_compute<double>(src[k * in_step]);
      rplan->forward(rbuf.data(), buf.data(), s1, s2);
      if (!j.onesided) {
        for (int64_t k = n / 2 + 1; k < n; ++k) buf[k] = std::conj(buf[n - k]);
      }
    } else {
      std::fill(buf.begin(), buf.end(), cd(0, 0));
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
      plan.transform(buf.data(), j.inverse, s1);
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

Status dft_compute(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const Tensor& x = ctx.input(0);
  const int64_t r = x.rank();
  if (r < 2) return ctx.error("input must have rank >= 2 (signal dims + a complex dim), got " + x.describe(), StatusCode::kInvalidArgument);
  const int64_t cin = x.dim(-1);
  if (cin != 1 && cin != 2) {
    return ctx.error("the last input dim must be 1 (real) or 2 (complex), got " + x.describe(), StatusCode::kInvalidArgument);
  }
  int64_t axis = 1;
  if (info.opset() >= 20) {
    axis = -2;
    if (ctx.has_input(2)) {
      NXRT_ASSIGN_OR_RETURN(axis, scalar_int(ctx, 2, "axis"));
    }
  } else {
    axis = info.attr_int("axis", 1);
  }
  const int64_t axis_in = axis;
  if (!normalize_axis(&axis, r) || axis == r - 1) {
    return ctx.error("axis " + std::to_string(axis_in) + " is out of range for input " + x.describe() +
                         " (accepted: [-r, -2] or [0, r-2]; the last dim holds the complex parts)",
                     StatusCode::kInvalidArgument);
  }
  DftJob j;
  j.inverse = info.attr_int("inverse", 0) != 0;
  j.onesided = info.attr_int("onesided", 0) != 0;
  j.cin = cin;
  j.in_len = x.dim(axis);
  const bool irfft = j.inverse && j.onesided;
  if (ctx.has_input(1)) {
    NXRT_ASSIGN_OR_RETURN(j.n, scalar_int(ctx, 1, "dft_length"));
    if (j.n <= 0) return ctx.error("dft_length must be positive, got " + std::to_string(j.n), StatusCode::kInvalidArgument);
  } else {
    j.n = irfft ? 2 * (j.in_len - 1) : j.in_len;
    if (j.n <= 0) {
      return ctx.error("the signal axis of " + x.describe() + " gives a transform length of " + std::to_string(j.n),
                       StatusCode::kInvalidArgument);
    }
  }
  if (j.n > kMaxDftLength) return ctx.error("dft_length " + std::to_string(j.n) + " is too large", StatusCode::kInvalidArgument);
  j.out_len = irfft ? j.n : (j.onesided ? j.n / 2 + 1 : j.n);
  j.cout = irfft ? 1 : 2;
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < r - 1; ++d) j.inner *= x.dim(d);
  Dims out_shape = x.shape();
  out_shape[axis] = j.out_len;
  out_shape[r - 1] = j.cout;
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_shape));
  const int64_t lines = outer * j.inner;
  if (lines == 0) return Status::Ok();

  fft::Plan plan(j.n);
  std::unique_ptr<fft::RealPlan> rplan;
  if (!j.inverse && cin == 1) rplan = std::make_unique<fft::RealPlan>(j.n);
  return dispatch_float(
      x.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        const T* in = x.data<T>();
        T* out = y->data<T>();
        const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, j.n));
        ctx.pool().parallel_for(lines, grain, [&](int64_t b, int64_t e) { dft_lines<T>(in, out, j, plan, rplan.get(), b, e); });
        return Status::Ok();
      },
      [&] { return ctx.error("input must be float16, bfloat16, float or double, got " + x.describe(), StatusCode::kInvalidArgument); });
}

// ---------------------------------------------------------------------------------------------
// STFT

Status stft_compute(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const Tensor& x = ctx.input(0);
  if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2)) {
    return ctx.error("signal must be [batch, length, 1 or 2], got " + x.describe(), StatusCode::kInvalidArgument);
  }
  const int64_t batch = x.dim(0), len = x.dim(1), cin = x.dim(2);
  NXRT_ASSIGN_OR_RETURN(int64_t step, scalar_int(ctx, 1, "frame_step"));
  if (step <= 0) return ctx.error("frame_step must be positive, got " + std::to_string(step), StatusCode::kInvalidArgument);
  std::vector<double> window;
  bool has_window = ctx.has_input(2);
  if (has_window) {
    const Tensor& w = ctx.input(2);
    if (w.rank() != 1) return ctx.error("window must be 1-D, got " + w.describe(), StatusCode::kInvalidArgument);
    if (w.dtype() != x.dtype()) {
      return ctx.error("window dtype must match the signal: " + w.describe() + " vs " + x.describe(), StatusCode::kInvalidArgument);
    }
    auto wv = read_double_values(w);
    if (!wv.ok()) return ctx.error(wv.status().message(), StatusCode::kInvalidArgument);
    window = std::move(wv.value());
  }
  int64_t fl = 0;
  if (ctx.has_input(3)) {
    NXRT_ASSIGN_OR_RETURN(fl, scalar_int(ctx, 3, "frame_length"));
  } else {
    fl = has_window ? static_cast<int64_t>(window.size()) : len;
  }
  if (fl <= 0 || fl > kMaxDftLength) {
    return ctx.error("frame_length must be in [1, 2^30], got " + std::to_string(fl), StatusCode::kInvalidArgument);
  }
  if (!has_window) window.assign(static_cast<size_t>(fl), 1.0);
  if (len < fl) {
    return ctx.error("signal length " + std::to_string(len) + " is shorter than frame_length " + std::to_string(fl),
                     StatusCode::kInvalidArgument);
  }
  const int64_t frames = 1 + (len - fl) / step;
  const bool onesided = info.attr_int("onesided", 1) != 0;
  const int64_t bins = onesided ? fl / 2 + 1 : fl;
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), {batch, frames, bins, 2}));
  const int64_t wlen = std::min<int64_t>(static_cast<int64_t>(window.size()), fl);
  fft::Plan plan(fl);
  fft::RealPlan rplan(fl);
  return dispatch_float(
      x.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        const T* in = x.data<T>();
        T* out = y->data<T>();
        ctx.pool().parallel_for(batch * frames, std::max<int64_t>(1, 16384 / fl), [&](int64_t b0, int64_t e0) {
          std::vector<cd> buf(static_cast<size_t>(fl)), s1, s2;
          std::vector<double> rbuf(static_cast<size_t>(fl), 0.0);
          for (int64_t t = b0; t < e0; ++t) {
            const int64_t b = t / frames, f = t % frames;
            const int64_t begin = f * step;
            const int64_t avail = std::min(wlen, len - begin);  // samples inside the signal
            const T* src = in + (b * len + begin) * cin;
            if (cin == 1) {
              for (int64_t k = 0; k < avail; ++k) rbuf[k] = to_compute<double>(src[k]) * window[k];
              for (int64_t k = avail; k < fl; ++k) rbuf[k] = 0.0;
              rplan.forward(rbuf.data(), buf.data(), s1, s2);
              if (!onesided) {
                for (int64_t k = fl / 2 + 1; k < fl; ++k) buf[k] = std::conj(buf[fl - k]);
              }
            } else {
              for (int64_t k = 0; k < avail; ++k) buf[k] = cd(to_compute<double>(src[2 * k]), to_compute<double>(src[2 * k + 1])) * window[k];
              for (int64_t k = avail; k < fl; ++k) buf[k] = cd(0, 0);
              plan.transform(buf.data(), false, s1);
            }
            T* dst = out + t * bins * 2;
            for (int64_t k = 0; k < bins; ++k) {
              dst[2 * k] = from_compute<T>(buf[k].real());
              dst[2 * k + 1] = from_compute<T>(buf[k].imag());
            }
          }
        });
        return Status::Ok();
      },
      [&] { return ctx.error("signal must be float16, bfloat16, float or double, got " + x.describe(), StatusCode::kInvalidArgument); });
}

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
  r.add_fn("", "DFT", 17, INT64_MAX, &dft_compute);
  r.add_fn("", "STFT", 17, INT64_MAX, &stft_compute);
  r.add_fn("", "HannWindow", 17, INT64_MAX, &window_compute<WindowKind::kHann>);
  r.add_fn("", "HammingWindow", 17, INT64_MAX, &window_compute<WindowKind::kHamming>);
  r.add_fn("", "BlackmanWindow", 17, INT64_MAX, &window_compute<WindowKind::kBlackman>);
  r.add_fn("", "MelWeightMatrix", 17, INT64_MAX, &mel_weight_matrix_compute);
}

}  // namespace nxrt::ops
