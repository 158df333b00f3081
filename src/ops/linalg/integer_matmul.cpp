// MatMulInteger (opset 10) and QLinearMatMul (opset 10, 21): numpy.matmul over 8-bit integers with
// zero points (scalar, per row of A / per column of B, or per batch-row / batch-column).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ep/thread_pool.h"
#include "ops/common.h"
#include "ops/linalg/linalg_util.h"
#include "ops/cast/dynamic_quantize.h"
#include "ops/linalg/qgemm_u8s8.h"
#include "ops/reduction/reduction_util.h"

namespace nxrt::ops {

namespace {

// Per-row (A) or per-column (B) parameter indexing: scalar, [rows], or [batches * rows].
struct PerIndex {
  int64_t mode = 0;  // 0 scalar, 1 per row, 2 per batch-row
  int64_t rows = 1;
  int64_t at(int64_t batch, int64_t row) const { return mode == 0 ? 0 : (mode == 1 ? row : batch * rows + row); }
};

Result<PerIndex> per_index(const Tensor* t, int64_t rows, int64_t batches, const char* what) {
  PerIndex p;
  p.rows = rows;
  if (t == nullptr || t->numel() == 1) return p;
  if (t->numel() == rows) {
    p.mode = 1;
    return p;
  }
  if (t->numel() == rows * batches) {
    p.mode = 2;
    return p;
  }
  return invalid_argument(std::string(what) + " " + t->describe() + " is neither a scalar nor per-" +
                          (std::string(what).find("b_") == 0 || std::string(what).find("y_") == 0 ? "column" : "row") +
                          " (" + std::to_string(rows) + " values)");
}

Result<std::vector<int32_t>> zero_points(const Tensor* t) {
  if (t == nullptr) return std::vector<int32_t>{0};
  auto v = read_int_values(*t);
  if (!v.ok()) return v.status();
  std::vector<int32_t> out(v.value().begin(), v.value().end());
  if (out.empty()) out.push_back(0);
  return out;
}

// A (batches_a, M, K) minus per-row zero point -> int32; B (batches_b, K, N) minus per-column zero point.
Result<std::vector<int32_t>> centered(const Tensor& x, const Tensor* zp, int64_t batches, int64_t rows, int64_t cols,
                                      bool per_col, const char* what) {
  NXRT_ASSIGN_OR_RETURN(PerIndex pi, per_index(zp, per_col ? cols : rows, batches, what));
  NXRT_ASSIGN_OR_RETURN(std::vector<int32_t> z, zero_points(zp));
  std::vector<int32_t> out(static_cast<size_t>(batches * rows * cols));
  auto vals = read_int_values(x);
  if (!vals.ok()) return vals.status();
  const auto& v = vals.value();
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = (b * rows + r) * cols + c;
        out[i] = static_cast<int32_t>(v[i]) - z[pi.at(b, per_col ? c : r)];
      }
  return out;
}

// Integer batched matmul of the centered operands into int32 (wrapping).
void int_matmul(const std::vector<int32_t>& a, const std::vector<int32_t>& b, int32_t* y, const MatMulShape& s,
                ep::ThreadPool& pool) {
  matmul_batched<int32_t>(a.data(), b.data(), y, s, pool);
}

bool is_8bit(DataType t) { return t == DataType::kInt8 || t == DataType::kUInt8; }

Status matmul_integer_compute(ep::KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (!is_8bit(a.dtype()) || !is_8bit(b.dtype())) {
    return ctx.error("MatMulInteger expects int8/uint8 operands, got " + a.describe() + " and " + b.describe(),
                     StatusCode::kInvalidArgument);
  }
  auto sr = matmul_shape(a.shape(), b.shape());
  if (!sr.ok()) return ctx.error(sr.status().message(), StatusCode::kInvalidArgument);
  const MatMulShape& s = sr.value();
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kInt32, s.out_shape));
  if (y->numel() == 0) return Status::Ok();
  auto ac = centered(a, ctx.has_input(2) ? &ctx.input(2) : nullptr, s.a_batches, s.M, s.K, false, "a_zero_point");
  if (!ac.ok()) return ctx.error(ac.status().message(), StatusCode::kInvalidArgument);
  auto bc = centered(b, ctx.has_input(3) ? &ctx.input(3) : nullptr, s.b_batches, s.K, s.N, true, "b_zero_point");
  if (!bc.ok()) return ctx.error(bc.status().message(), StatusCode::kInvalidArgument);
  int_matmul(ac.value(), bc.value(), y->data<int32_t>(), s, ctx.pool());
  return Status::Ok();
}

// A constant 2-D 8-bit B (and its constant zero point) packed once at creation for the tier's 8-bit
// GEMM (qgemm_u8s8.h): MatMulInteger's and QLinearMatMul's exact int32 sums for A's rows (any batch
// shape), or nothing (sums() false) where the generic loop must take the call.
struct PackedIntegerB {
  QGemmKernel kernel = QGemmKernel::kNone;
  QGemmPackedB packed;
  std::vector<int32_t> zb;
  bool ready() const { return !packed.empty(); }
  void init(const ep::KernelInfo& info, size_t b_idx, size_t zb_idx) {
    const Tensor* b = info.const_input(b_idx);
    if (!b || b->rank() != 2 || !is_8bit(b->dtype()) || b->dim(0) <= 0 || b->dim(1) <= 0) return;
    const int64_t K = b->dim(0), N = b->dim(1);
    std::vector<int32_t> z(static_cast<size_t>(N), 0);
    if (info.input_present(zb_idx)) {
      const Tensor* zt = info.const_input(zb_idx);
      if (!zt || zt->dtype() != b->dtype() || (zt->numel() != 1 && !(zt->rank() == 1 && zt->numel() == N))) return;
      auto v = zero_points(zt);
      if (!v.ok()) return;
      for (int64_t n = 0; n < N; ++n) z[static_cast<size_t>(n)] = v.value()[zt->numel() == 1 ? 0 : static_cast<size_t>(n)];
    }
    kernel = choose_qgemm_kernel(info.isa());
    if (kernel == QGemmKernel::kNone) return;
    packed = qgemm_pack_b(b->raw_data(), b->dtype() == DataType::kInt8, K, N);
    zb = std::move(z);
  }
  // sum_k (A - za)(B - zb) into out ([a_batches * M, N], s's shapes) when this call fits the packed B:
  // A 8-bit with K columns, a_zero_point absent, one value or per row (M or a_batches * M values).
  Result<bool> sums(ep::KernelContext& ctx, const Tensor& a, const Tensor* za_t, const MatMulShape& s, int32_t* out) const {
    if (!ready() || !is_8bit(a.dtype()) || a.rank() < 1 || a.dim(-1) != packed.K || s.N != packed.N || s.b_batches != 1) return false;
    if (za_t && za_t->dtype() != a.dtype()) return false;
    auto pi = per_index(za_t, s.M, s.a_batches, "a_zero_point");
    if (!pi.ok()) return false;
    auto zav = zero_points(za_t);
    if (!zav.ok()) return false;
    const int64_t rows = s.a_batches * s.M;
    if (rows == 0) return true;
    const size_t ws_bytes = qgemm_workspace_bytes(packed, rows);
    NXRT_ASSIGN_OR_RETURN(void* ws, ctx.workspace(ws_bytes + static_cast<size_t>(rows) * sizeof(int32_t)));
    int32_t* za = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(ws) + ws_bytes);
    for (int64_t bt = 0; bt < s.a_batches; ++bt)
      for (int64_t m = 0; m < s.M; ++m) za[bt * s.M + m] = zav.value()[static_cast<size_t>(pi.value().at(bt, m))];
    qgemm_u8s8(kernel, a.raw_data(), a.dtype() == DataType::kInt8, rows, packed.K, za, packed, zb.data(), out, packed.N,
               &ctx.pool(), ws);
    return true;
  }
};

// Scales as float values, rounded through their own dtype.
Result<std::vector<double>> scales(const Tensor& t) { return read_double_values(t); }

template <typename TO>
void store_quant(double v, TO* out) {
  double r = round_half_even(v);  // std::nearbyint's result under the default rounding mode
  const double lo = static_cast<double>(std::numeric_limits<TO>::lowest());
  const double hi = static_cast<double>(std::numeric_limits<TO>::max());
  *out = static_cast<TO>(std::min(hi, std::max(lo, r)));
}

// ---------------------------------------------------------------------------------------------
// float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ) decode and saturating round-to-nearest-even encode, for
// QLinearMatMul-21.

bool is_f8(DataType t) {
  return t == DataType::kFloat8E4M3FN || t == DataType::kFloat8E4M3FNUZ || t == DataType::kFloat8E5M2 ||
         t == DataType::kFloat8E5M2FNUZ;
}

float f8_decode(uint8_t b, DataType t) {
  const bool e5 = t == DataType::kFloat8E5M2 || t == DataType::kFloat8E5M2FNUZ;
  const bool uz = t == DataType::kFloat8E4M3FNUZ || t == DataType::kFloat8E5M2FNUZ;
  const int mbits = e5 ? 2 : 3;
  const int bias = (e5 ? 15 : 7) + (uz ? 1 : 0);
  const int emax = e5 ? 31 : 15;
  const float sign = (b & 0x80) ? -1.f : 1.f;
  const int e = (b & 0x7f) >> mbits, f = b & ((1 << mbits) - 1);
  if (uz && b == 0x80) return std::numeric_limits<float>::quiet_NaN();
  if (t == DataType::kFloat8E4M3FN && (b & 0x7f) == 0x7f) return std::numeric_limits<float>::quiet_NaN();
  if (t == DataType::kFloat8E5M2 && e == emax) {
    return f == 0 ? sign * std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  }
  if (e == 0) return sign * std::ldexp(static_cast<float>(f), 1 - bias - mbits);
  return sign * std::ldexp(1.f + static_cast<float>(f) / static_cast<float>(1 << mbits), e - bias);
}

uint8_t f8_encode(float v, DataType t) {
  const bool uz = t == DataType::kFloat8E4M3FNUZ || t == DataType::kFloat8E5M2FNUZ;
  if (std::isnan(v)) return uz ? 0x80 : (t == DataType::kFloat8E5M2 ? 0x7f : 0x7f);
  // Positive finite codes in increasing order (codes 0..127 are monotonic where finite).
  int top = 0x7f;
  while (!std::isfinite(f8_decode(static_cast<uint8_t>(top), t))) --top;
  const float a = std::fabs(v);
  const uint8_t sign = v < 0 ? 0x80 : 0x00;
  if (a >= f8_decode(static_cast<uint8_t>(top), t)) return static_cast<uint8_t>(sign | top);  // saturate
  int lo = 0, hi = top;  // f8_decode(lo) <= a < f8_decode(hi)
  while (hi - lo > 1) {
    int mid = (lo + hi) / 2;
    (f8_decode(static_cast<uint8_t>(mid), t) <= a ? lo : hi) = mid;
  }
  const float dl = a - f8_decode(static_cast<uint8_t>(lo), t), dh = f8_decode(static_cast<uint8_t>(hi), t) - a;
  int code = (dl < dh || (dl == dh && (lo & 1) == 0)) ? lo : hi;
  if (code == 0) return 0;  // no negative zero needed
  return static_cast<uint8_t>((v < 0 ? 0x80 : 0x00) | code);
}

// Float8 operand minus per-row/column zero point, as float.
Result<std::vector<float>> centered_f8(const Tensor& x, const Tensor* zp, int64_t batches, int64_t rows, int64_t cols,
                                      bool per_col, const char* what) {
  NXRT_ASSIGN_OR_RETURN(PerIndex pi, per_index(zp, per_col ? cols : rows, batches, what));
  if (zp && zp->dtype() != x.dtype()) return invalid_argument(std::string(what) + " dtype differs from its input");
  std::vector<float> out(static_cast<size_t>(batches * rows * cols));
  const uint8_t* xd = x.data<uint8_t>();
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const int64_t i = (b * rows + r) * cols + c;
        const float z = zp ? f8_decode(zp->data<uint8_t>()[pi.at(b, per_col ? c : r)], x.dtype()) : 0.f;
        out[i] = f8_decode(xd[i], x.dtype()) - z;
      }
  return out;
}

Status qlinear_matmul_compute(ep::KernelContext& ctx, const PackedIntegerB* packed) {
  for (size_t i = 0; i < 8; ++i) {
    if (i != 2 && i != 5 && i != 7 && !ctx.has_input(i)) return ctx.error("missing input " + std::to_string(i));
  }
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  const Tensor& sa = ctx.input(1);
  const Tensor& sb = ctx.input(4);
  const Tensor& sy = ctx.input(6);
  const Tensor* za = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const Tensor* zb = ctx.has_input(5) ? &ctx.input(5) : nullptr;
  const Tensor* zy = ctx.has_input(7) ? &ctx.input(7) : nullptr;
  const bool f8 = is_f8(a.dtype());
  if (f8 ? (b.dtype() != a.dtype()) : (!is_8bit(a.dtype()) || !is_8bit(b.dtype()))) {
    return ctx.error("QLinearMatMul operands must both be int8/uint8 or the same float8 type, got " + a.describe() +
                         " and " + b.describe(),
                     StatusCode::kInvalidArgument);
  }
  const DataType out_dt = zy ? zy->dtype() : a.dtype();
  if (!is_8bit(out_dt) && !is_f8(out_dt)) {
    return ctx.error(std::string("unsupported output dtype ") + dtype_name(out_dt), StatusCode::kNotImplemented);
  }
  auto sr = matmul_shape(a.shape(), b.shape());
  if (!sr.ok()) return ctx.error(sr.status().message(), StatusCode::kInvalidArgument);
  const MatMulShape& s = sr.value();
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, out_dt, s.out_shape));
  if (y->numel() == 0) return Status::Ok();
  const int64_t nb = s.batch_count();
  std::vector<double> acc(static_cast<size_t>(nb * s.M * s.N));
  if (f8) {
    auto ac = centered_f8(a, za, s.a_batches, s.M, s.K, false, "a_zero_point");
    if (!ac.ok()) return ctx.error(ac.status().message(), StatusCode::kInvalidArgument);
    auto bc = centered_f8(b, zb, s.b_batches, s.K, s.N, true, "b_zero_point");
    if (!bc.ok()) return ctx.error(bc.status().message(), StatusCode::kInvalidArgument);
    std::vector<float> accf(acc.size());
    matmul_batched<float>(ac.value().data(), bc.value().data(), accf.data(), s, ctx.pool());
    std::copy(accf.begin(), accf.end(), acc.begin());
  } else {
    std::vector<int32_t> acci(acc.size());
    bool done = false;
    if (packed) { NXRT_ASSIGN_OR_RETURN(done, packed->sums(ctx, a, za, s, acci.data())); }
    if (!done) {
      auto ac = centered(a, za, s.a_batches, s.M, s.K, false, "a_zero_point");
      if (!ac.ok()) return ctx.error(ac.status().message(), StatusCode::kInvalidArgument);
      auto bc = centered(b, zb, s.b_batches, s.K, s.N, true, "b_zero_point");
      if (!bc.ok()) return ctx.error(bc.status().message(), StatusCode::kInvalidArgument);
      int_matmul(ac.value(), bc.value(), acci.data(), s, ctx.pool());
    }
    std::copy(acci.begin(), acci.end(), acc.begin());
  }

  auto sav = scales(sa), sbv = scales(sb), syv = scales(sy);
  if (!sav.ok() || !sbv.ok() || !syv.ok()) return ctx.error("scales must be float tensors", StatusCode::kInvalidArgument);
  auto pa = per_index(&sa, s.M, s.a_batches, "a_scale");
  auto pb = per_index(&sb, s.N, s.b_batches, "b_scale");
  auto py = per_index(&sy, s.N, nb, "y_scale");
  if (!pa.ok() || !pb.ok() || !py.ok()) {
    return ctx.error("scale shapes: " + (!pa.ok() ? pa.status().message() : !pb.ok() ? pb.status().message() : py.status().message()),
                     StatusCode::kInvalidArgument);
  }
  std::vector<double> zyv;
  if (zy && is_f8(zy->dtype())) {
    for (int64_t i = 0; i < zy->numel(); ++i) zyv.push_back(f8_decode(zy->data<uint8_t>()[i], zy->dtype()));
  } else {
    auto z = zero_points(zy);
    if (!z.ok()) return ctx.error(z.status().message(), StatusCode::kInvalidArgument);
    zyv.assign(z.value().begin(), z.value().end());
  }
  if (zyv.empty()) zyv.push_back(0.0);
  auto pzy = per_index(zy, s.N, nb, "y_zero_point");
  if (!pzy.ok()) return ctx.error(pzy.status().message(), StatusCode::kInvalidArgument);
  const DataType st = sa.dtype();
  // Batch index of A/B for each output batch (broadcast).
  std::vector<int64_t> a_of(static_cast<size_t>(nb)), b_of(static_cast<size_t>(nb));
  {
    auto cur = strided_cursor(s.batch, s.batch.size(), s.a_batch_strides, s.b_batch_strides);
    for (int64_t i = 0; i < nb; ++i, cur.next()) {
      a_of[i] = cur.offset(0);
      b_of[i] = cur.offset(1);
    }
  }
  if (is_f8(out_dt)) {
    for (int64_t bi = 0; bi < nb; ++bi)
      for (int64_t m = 0; m < s.M; ++m) {
        const double sam = sav.value()[pa.value().at(a_of[bi], m)];
        for (int64_t n = 0; n < s.N; ++n) {
          const double sbn = sbv.value()[pb.value().at(b_of[bi], n)];
          const double syn = syv.value()[py.value().at(bi, n)];
          const int64_t o = (bi * s.M + m) * s.N + n;
          const double zp = zyv[pzy.value().at(bi, n)];
          y->data<uint8_t>()[o] = f8_encode(static_cast<float>(acc[o] * sam * sbn / syn + zp), out_dt);
        }
      }
    return Status::Ok();
  }
  // 8-bit outputs, rows over the threads: each row's multipliers and zero points per column (made again
  // only when the row's a_scale or batch changes them), then acc * mult + zp quantized.
  const int64_t rows = nb * s.M;
  uint8_t* out = static_cast<uint8_t*>(y->raw_data());
  const bool u8 = out_dt == DataType::kUInt8;
  ctx.pool().parallel_for(rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, s.N)), [&](int64_t r0, int64_t r1) {
    std::vector<double> mult(static_cast<size_t>(s.N)), zpn(static_cast<size_t>(s.N));
    int64_t made_bi = -1;
    double made_sam = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t bi = r / s.M, m = r % s.M;
      const double sam = sav.value()[pa.value().at(a_of[bi], m)];
      if (bi != made_bi || sam != made_sam || r == r0) {
        for (int64_t n = 0; n < s.N; ++n) {
          const double sbn = sbv.value()[pb.value().at(b_of[bi], n)];
          const double syn = syv.value()[py.value().at(bi, n)];
          mult[static_cast<size_t>(n)] = round_to_float_dtype(round_to_float_dtype(sam * sbn, st) / syn, st);
          zpn[static_cast<size_t>(n)] = zyv[pzy.value().at(bi, n)];
        }
        made_bi = bi;
        made_sam = sam;
      }
      const double* ar = acc.data() + r * s.N;
      uint8_t* yr = out + r * s.N;
      for (int64_t n = 0; n < s.N; ++n) {
        const double v = ar[n] * mult[static_cast<size_t>(n)] + zpn[static_cast<size_t>(n)];
        if (u8) store_quant<uint8_t>(v, yr + n);
        else store_quant<int8_t>(v, reinterpret_cast<int8_t*>(yr + n));
      }
    }
  });
  return Status::Ok();
}

// MatMulInteger and QLinearMatMul with a constant 2-D B (a quantized model's weights): B packed once at
// creation (PackedIntegerB), A's rows through the 8-bit GEMM. Other calls, and tiers without a vector
// kernel, take the generic loop (also the tests' reference).
class MatMulInteger final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    b_.init(info, 1, 3);
    return Status::Ok();
  }
  Status compute(ep::KernelContext& ctx) const override {
    if (!b_.ready()) return matmul_integer_compute(ctx);
    const Tensor& a = ctx.input(0);
    auto sr = matmul_shape(a.shape(), ctx.input(1).shape());
    if (!sr.ok() || !is_8bit(a.dtype())) return matmul_integer_compute(ctx);
    const MatMulShape& s = sr.value();
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kInt32, s.out_shape));
    if (y->numel() == 0) return Status::Ok();
    NXRT_ASSIGN_OR_RETURN(const bool done, b_.sums(ctx, a, ctx.has_input(2) ? &ctx.input(2) : nullptr, s, y->data<int32_t>()));
    return done ? Status::Ok() : matmul_integer_compute(ctx);
  }

 private:
  PackedIntegerB b_;
};

class QLinearMatMul final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    b_.init(info, 3, 5);
    return Status::Ok();
  }
  Status compute(ep::KernelContext& ctx) const override { return qlinear_matmul_compute(ctx, b_.ready() ? &b_ : nullptr); }

 private:
  PackedIntegerB b_;
};

// ---------------------------------------------------------------------------------------------
// com.microsoft MatMulIntegerToFloat and DynamicQuantizeMatMul: the ops ORT's graph optimizer makes of
// quantize_dynamic's DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(Mul(a_scale, b_scale))
// [-> Add(bias)] (optimizer/fusions/fuse_matmul_integer_to_float.cpp writes the first of them too):
//   Y = float(sum_k (A - a_zp)(B - b_zp)) * (a_scale * b_scale) [+ bias]
// with the unfused graph's float operations in its order: the int32 sums converted to float, times
// the float product of the two scales, then the bias added (no fused multiply-add), so the fused node
// gives the unfused graph's bits. a_scale and a_zero_point hold one value; b_scale and b_zero_point one
// value or one per column of B; bias one per column.
//   MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zero_point?, b_zero_point?, bias?)
//   DynamicQuantizeMatMul(A float, B, b_scale, b_zero_point?, bias?): A quantized first as
//     DynamicQuantizeLinear does (uint8, one scale and zero point for the tensor).

// A float32 tensor holding one value or one per column of N (shaped [N] or [1, ..., 1, N]), read in
// place: at(n) is column n's value.
struct PerColumn {
  const float* p = nullptr;
  bool each = false;
  float at(int64_t n) const { return p[each ? n : 0]; }
};
Result<PerColumn> per_column(const Tensor& t, int64_t N, const char* what) {
  const bool columns = t.numel() == N && t.rank() >= 1 && t.dim(-1) == N;
  if (t.numel() != 1 && !columns) {
    return invalid_argument(std::string(what) + " must hold one value or one per column of B (" + std::to_string(N) +
                            "), got " + t.describe());
  }
  if (t.dtype() != DataType::kFloat) return invalid_argument(std::string(what) + " must be float32, got " + t.describe());
  return PerColumn{t.data<float>(), t.numel() != 1};
}

// The per-column multipliers mult[n] = lead * s.at(n), in step scratch (no heap memory per call).
Result<float*> column_multipliers(ep::KernelContext& ctx, float lead, const PerColumn& s, int64_t N) {
  NXRT_ASSIGN_OR_RETURN(void* ws, ctx.workspace(static_cast<size_t>(N) * sizeof(float)));
  float* m = static_cast<float*>(ws);
  for (int64_t n = 0; n < N; ++n) m[n] = lead * s.at(n);
  return m;
}

// dst[c * rows + r] = src[r * cols + c]: an 8-bit [rows, cols] matrix transposed.
void transpose_bytes(const uint8_t* src, int64_t rows, int64_t cols, uint8_t* dst) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
}

class IntegerMatMulToFloat final : public ep::Kernel {
 public:
  explicit IntegerMatMulToFloat(bool dynamic) : dynamic_(dynamic) {}
  Status init(const ep::KernelInfo& info) {
    // Inputs: MatMulIntegerToFloat A 0, B 1, a_scale 2, b_scale 3, a_zp 4, b_zp 5, bias 6;
    // DynamicQuantizeMatMul A 0, B 1, b_scale 2, b_zp 3, bias 4.
    b_scale_ = dynamic_ ? 2 : 3;
    b_zp_ = dynamic_ ? 3 : 5;
    bias_ = dynamic_ ? 4 : 6;
    b_.init(info, 1, b_zp_);
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    NXRT_ASSIGN_OR_RETURN(const Tensor& a_in, ctx.required_tensor(0, "A"));
    NXRT_ASSIGN_OR_RETURN(const Tensor& b, ctx.required_tensor(1, "B"));
    NXRT_ASSIGN_OR_RETURN(const Tensor& b_scale, ctx.required_tensor(b_scale_, "b_scale"));
    if (!is_8bit(b.dtype())) return ctx.error("B must be int8 or uint8, got " + b.describe(), StatusCode::kInvalidArgument);
    if (dynamic_ ? a_in.dtype() != DataType::kFloat : !is_8bit(a_in.dtype())) {
      return ctx.error(std::string("A must be ") + (dynamic_ ? "float32" : "int8 or uint8") + ", got " + a_in.describe(),
                       StatusCode::kInvalidArgument);
    }
    auto sr = matmul_shape(a_in.shape(), b.shape());
    if (!sr.ok()) return ctx.error(sr.status().message(), StatusCode::kInvalidArgument);
    const MatMulShape& s = sr.value();
    auto bs = per_column(b_scale, s.N, "b_scale");
    if (!bs.ok()) return ctx.error(bs.status().message(), StatusCode::kInvalidArgument);
    const float* bp = nullptr;  // the bias, read in place
    if (ctx.has_input(bias_)) {
      const Tensor& bt = ctx.input(bias_);
      if (bt.rank() != 1 || bt.numel() != s.N || bt.dtype() != DataType::kFloat) {
        return ctx.error("bias must be float32 [" + std::to_string(s.N) + "], got " + bt.describe(), StatusCode::kInvalidArgument);
      }
      bp = bt.data<float>();
    }
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, s.out_shape));
    if (y->numel() == 0) return Status::Ok();

    // A as 8-bit values with one scale and zero point.
    float a_scale = 0.f;
    Tensor a_q, za_t;
    const Tensor* a = &a_in;
    const Tensor* za = nullptr;
    if (dynamic_) {
      NXRT_ASSIGN_OR_RETURN(void* qa, ctx.workspace(static_cast<size_t>(a_in.numel())));
      uint8_t zp = 0;
      dynamic_quantize_u8(ctx.pool(), a_in.data<float>(), a_in.numel(), ctx.info().isa(), static_cast<uint8_t*>(qa), &a_scale,
                          &zp);
      a_q = Tensor::borrow(DataType::kUInt8, a_in.shape(), qa);
      za_t = Tensor(DataType::kUInt8, {});
      za_t.data<uint8_t>()[0] = zp;
      a = &a_q;
      za = &za_t;
    } else {
      NXRT_ASSIGN_OR_RETURN(const Tensor& as, ctx.required_tensor(2, "a_scale"));
      if (as.numel() != 1 || as.dtype() != DataType::kFloat) {
        return ctx.error("a_scale must be one float32 value, got " + as.describe(), StatusCode::kNotImplemented);
      }
      a_scale = as.data<float>()[0];
      if (ctx.has_input(4)) {
        za = &ctx.input(4);
        if (za->numel() != 1 || za->dtype() != a->dtype()) {
          return ctx.error("a_zero_point must be one value of A's type, got " + za->describe(), StatusCode::kNotImplemented);
        }
      }
    }
    const Tensor* zb = ctx.has_input(b_zp_) ? &ctx.input(b_zp_) : nullptr;

    // The exact int32 sums, written where the float outputs go (same size), then converted in place.
    int32_t* acc = reinterpret_cast<int32_t*>(y->data<float>());
    bool done = false;
    NXRT_ASSIGN_OR_RETURN(done, b_.sums(ctx, *a, za, s, acc));
    if (!done) {
      auto ac = centered(*a, za, s.a_batches, s.M, s.K, false, "a_zero_point");
      if (!ac.ok()) return ctx.error(ac.status().message(), StatusCode::kInvalidArgument);
      auto bc = centered(b, zb, s.b_batches, s.K, s.N, true, "b_zero_point");
      if (!bc.ok()) return ctx.error(bc.status().message(), StatusCode::kInvalidArgument);
      int_matmul(ac.value(), bc.value(), acc, s, ctx.pool());
    }
    NXRT_ASSIGN_OR_RETURN(const float* mp, column_multipliers(ctx, a_scale, bs.value(), s.N));
    const int64_t rows = y->numel() / s.N, N = s.N;
    float* yd = y->data<float>();
    ctx.pool().parallel_for(rows, std::max<int64_t>(1, 16384 / N), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int32_t* ar = acc + r * N;
        float* yr = yd + r * N;
        if (bp) {
          for (int64_t n = 0; n < N; ++n) yr[n] = static_cast<float>(ar[n]) * mp[n] + bp[n];
        } else {
          for (int64_t n = 0; n < N; ++n) yr[n] = static_cast<float>(ar[n]) * mp[n];
        }
      }
    });
    return Status::Ok();
  }

 private:
  bool dynamic_;
  size_t b_scale_ = 3, b_zp_ = 5, bias_ = 6;
  PackedIntegerB b_;
};

// ---------------------------------------------------------------------------------------------
// com.microsoft QGemm (QOperator-quantized Gemm, e.g. a CNN's classifier):
//   QGemm(A, a_scale, a_zero_point, B, b_scale, b_zero_point, C?, y_scale?, y_zero_point?; alpha,
//         transA, transB)
//   Y = (alpha * a_scale * b_scale[n]) * float(sum_k (A - a_zp)(B - b_zp) + C)
// C is int32 (the bias in the product's scale); without y_scale Y is float32, with it Y is quantized
// (round half to even of Y / y_scale, + y_zero_point, saturated to y_zero_point's type). A 2-D,
// a_scale / a_zero_point one value, b_scale / b_zero_point one value or one per column of op(B); C one
// value, one per column or [M, N]. A constant B is transposed as transB says and packed once.
class QGemm final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    trans_a_ = info.attr_int("transA", 0) != 0;
    trans_b_ = info.attr_int("transB", 0) != 0;
    alpha_ = info.attr_float("alpha", 1.f);
    const Tensor* b = info.const_input(3);
    const Tensor* zb = info.input_present(5) ? info.const_input(5) : nullptr;
    if (!b || b->rank() != 2 || !is_8bit(b->dtype()) || b->numel() == 0 || (info.input_present(5) && !zb)) return Status::Ok();
    kernel_ = choose_qgemm_kernel(info.isa());
    if (kernel_ == QGemmKernel::kNone) return Status::Ok();
    const int64_t K = trans_b_ ? b->dim(1) : b->dim(0), N = trans_b_ ? b->dim(0) : b->dim(1);
    const uint8_t* src = static_cast<const uint8_t*>(b->raw_data());
    std::vector<uint8_t> kn;
    if (trans_b_) {
      kn.resize(static_cast<size_t>(K * N));
      transpose_bytes(src, N, K, kn.data());
    }
    packed_ = qgemm_pack_b(trans_b_ ? kn.data() : src, b->dtype() == DataType::kInt8, K, N);
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    NXRT_ASSIGN_OR_RETURN(const Tensor& a, ctx.required_tensor(0, "A"));
    NXRT_ASSIGN_OR_RETURN(const Tensor& as, ctx.required_tensor(1, "a_scale"));
    NXRT_ASSIGN_OR_RETURN(const Tensor& b, ctx.required_tensor(3, "B"));
    NXRT_ASSIGN_OR_RETURN(const Tensor& bs, ctx.required_tensor(4, "b_scale"));
    if (!is_8bit(a.dtype()) || !is_8bit(b.dtype()) || a.rank() != 2 || b.rank() != 2) {
      return ctx.error("A and B must be 2-D int8/uint8, got " + a.describe() + " and " + b.describe(), StatusCode::kInvalidArgument);
    }
    const int64_t M = trans_a_ ? a.dim(1) : a.dim(0), K = trans_a_ ? a.dim(0) : a.dim(1);
    const int64_t Kb = trans_b_ ? b.dim(1) : b.dim(0), N = trans_b_ ? b.dim(0) : b.dim(1);
    if (K != Kb) return ctx.error("inner dims differ: " + a.describe() + " x " + b.describe(), StatusCode::kInvalidArgument);
    if (as.numel() != 1 || as.dtype() != DataType::kFloat) {
      return ctx.error("a_scale must be one float32 value, got " + as.describe(), StatusCode::kInvalidArgument);
    }
    auto bsv = per_column(bs, N, "b_scale");
    if (!bsv.ok()) return ctx.error(bsv.status().message(), StatusCode::kInvalidArgument);
    const Tensor* za = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    const Tensor* zb = ctx.has_input(5) ? &ctx.input(5) : nullptr;
    if (za && (za->numel() != 1 || za->dtype() != a.dtype())) {
      return ctx.error("a_zero_point must be one value of A's type, got " + za->describe(), StatusCode::kInvalidArgument);
    }
    if (zb && (zb->dtype() != b.dtype() || (zb->numel() != 1 && zb->numel() != N))) {
      return ctx.error("b_zero_point must be one value or one per column of B's type, got " + zb->describe(), StatusCode::kInvalidArgument);
    }
    const Tensor* c = ctx.has_input(6) ? &ctx.input(6) : nullptr;
    if (c && (c->dtype() != DataType::kInt32 || (c->numel() != 1 && c->numel() != N && c->numel() != M * N))) {
      return ctx.error("C must be int32 with 1, N or M x N values, got " + c->describe(), StatusCode::kInvalidArgument);
    }
    const bool quantized = ctx.has_input(7);
    DataType ydt = DataType::kFloat;
    float y_scale = 1.f;
    int32_t y_zp = 0;
    if (quantized) {
      const Tensor& ys = ctx.input(7);
      if (ys.numel() != 1 || ys.dtype() != DataType::kFloat) {
        return ctx.error("y_scale must be one float32 value, got " + ys.describe(), StatusCode::kInvalidArgument);
      }
      y_scale = ys.data<float>()[0];
      ydt = DataType::kUInt8;
      if (ctx.has_input(8)) {
        const Tensor& yz = ctx.input(8);
        if (yz.numel() != 1 || !is_8bit(yz.dtype())) {
          return ctx.error("y_zero_point must be one int8/uint8 value, got " + yz.describe(), StatusCode::kInvalidArgument);
        }
        ydt = yz.dtype();
        y_zp = ydt == DataType::kUInt8 ? static_cast<int32_t>(yz.data<uint8_t>()[0]) : static_cast<int32_t>(yz.data<int8_t>()[0]);
      }
    }
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, ydt, {M, N}));
    if (M == 0 || N == 0) return Status::Ok();
    // op(A) and op(B) as [M, K] and [K, N] 8-bit tensors.
    Tensor at_t, bt_t;
    const Tensor* A = &a;
    if (trans_a_) {
      at_t = Tensor(a.dtype(), {M, K});
      transpose_bytes(a.data<uint8_t>(), K, M, at_t.data<uint8_t>());
      A = &at_t;
    }
    NXRT_ASSIGN_OR_RETURN(void* accp, ctx.workspace(static_cast<size_t>(M * N) * sizeof(int32_t)));
    int32_t* acc = static_cast<int32_t*>(accp);
    auto zav = zero_points(za);
    auto zbv = zero_points(zb);
    if (!zav.ok() || !zbv.ok()) return ctx.error("zero points must be 8-bit", StatusCode::kInvalidArgument);
    if (!packed_.empty() && packed_.K == K && packed_.N == N) {
      // Per-row and per-column zero points in step scratch, then the GEMM's own.
      const size_t zbytes = static_cast<size_t>(M + N) * sizeof(int32_t);
      NXRT_ASSIGN_OR_RETURN(void* zw, ctx.workspace(zbytes + qgemm_workspace_bytes(packed_, M)));
      int32_t* zam = static_cast<int32_t*>(zw);
      int32_t* zbn = zam + M;
      std::fill(zam, zam + M, za ? zav.value()[0] : 0);
      for (int64_t n = 0; n < N; ++n) zbn[n] = zb ? zbv.value()[zb->numel() == 1 ? 0 : static_cast<size_t>(n)] : 0;
      qgemm_u8s8(kernel_, A->raw_data(), A->dtype() == DataType::kInt8, M, K, zam, packed_, zbn, acc, N, &ctx.pool(),
                 static_cast<uint8_t*>(zw) + zbytes);
    } else {
      const Tensor* B = &b;
      if (trans_b_) {
        bt_t = Tensor(b.dtype(), {K, N});
        transpose_bytes(b.data<uint8_t>(), N, K, bt_t.data<uint8_t>());
        B = &bt_t;
      }
      auto sr = matmul_shape(A->shape(), B->shape());
      if (!sr.ok()) return ctx.error(sr.status().message(), StatusCode::kInvalidArgument);
      auto ac = centered(*A, za, 1, M, K, false, "a_zero_point");
      auto bc = centered(*B, zb, 1, K, N, true, "b_zero_point");
      if (!ac.ok() || !bc.ok()) return ctx.error((!ac.ok() ? ac.status() : bc.status()).message(), StatusCode::kInvalidArgument);
      int_matmul(ac.value(), bc.value(), acc, sr.value(), ctx.pool());
    }
    NXRT_ASSIGN_OR_RETURN(const float* mult, column_multipliers(ctx, alpha_ * as.data<float>()[0], bsv.value(), N));
    const int32_t* cd = c ? c->data<int32_t>() : nullptr;
    const int64_t cn = c ? c->numel() : 0;
    const int32_t lo = ydt == DataType::kInt8 ? -128 : 0, hi = ydt == DataType::kInt8 ? 127 : 255;
    ctx.pool().parallel_for(M, std::max<int64_t>(1, 16384 / N), [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m)
        for (int64_t n = 0; n < N; ++n) {
          int32_t v = acc[m * N + n];
          if (cd) v = static_cast<int32_t>(static_cast<uint32_t>(v) + static_cast<uint32_t>(cd[cn == 1 ? 0 : cn == N ? n : m * N + n]));
          const float f = static_cast<float>(v) * mult[n];
          if (!quantized) {
            y->data<float>()[m * N + n] = f;
            continue;
          }
          const int32_t qv = quantize_saturated(f, y_scale, y_zp, lo, hi);
          if (ydt == DataType::kUInt8) y->data<uint8_t>()[m * N + n] = static_cast<uint8_t>(qv);
          else y->data<int8_t>()[m * N + n] = static_cast<int8_t>(qv);
        }
    });
    return Status::Ok();
  }

 private:
  bool trans_a_ = false, trans_b_ = false;
  float alpha_ = 1.f;
  QGemmKernel kernel_ = QGemmKernel::kNone;
  QGemmPackedB packed_;
};

}  // namespace

void register_quant_matmul_ops(ep::KernelRegistry& r) {
  r.add_class<MatMulInteger>("", "MatMulInteger", 1);
  r.add_class<QLinearMatMul>("", "QLinearMatMul", 1);
  r.add_class<QGemm>("com.microsoft", "QGemm", 1);
  for (const bool dynamic : {false, true}) {
    r.add(ep::KernelDef{"com.microsoft", dynamic ? "DynamicQuantizeMatMul" : "MatMulIntegerToFloat", 1, INT64_MAX,
                        [dynamic](const ep::KernelInfo& info) -> Result<std::unique_ptr<ep::Kernel>> {
                          auto k = std::make_unique<IntegerMatMulToFloat>(dynamic);
                          NXRT_RETURN_IF_ERROR(k->init(info));
                          return std::unique_ptr<ep::Kernel>(std::move(k));
                        }});
  }
}

}  // namespace nxrt::ops
