// nxrt::BatchNormRelu(X, scale, B, mean, var), attribute epsilon: Relu(BatchNormalization(X, ...)), the
// kernel of the optimizer's BN-ReLU fusion (optimizer/fusions/fuse_bn_relu.cpp): one per-channel scale/shift +
// max(0, .) pass instead of two.
//
// The kernel folds the statistics into a = scale / sqrt(var + eps) and b = B - mean * a in double
// (ir::fold_batch_norm), as the BatchNormalization kernel does; the float path may contract x * a + b
// into one FMA (1 ulp apart).
#include <cmath>

#include "ep/cpu_features.h"
#include "ep/kernel.h"
#include "ir/tensor_util.h"
#include "ops/common.h"
#include "ops/fused/fused_ops.h"

namespace nxrt::ops {

namespace {

#if defined(__x86_64__) || defined(__i386__)
bool has_avx2() { return ep::cpu_has_avx2_fma(); }
#define NXRT_BNR_AVX2 __attribute__((target("avx2,fma")))
#else
bool has_avx2() { return false; }
#define NXRT_BNR_AVX2
#endif

__attribute__((always_inline)) inline void scale_shift_relu_body(const float* x, float* y, int64_t n, float a,
                                                                  float b) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] * a + b;
    y[i] = v > 0.f ? v : 0.f;
  }
}
NXRT_BNR_AVX2 void scale_shift_relu_avx2(const float* x, float* y, int64_t n, float a, float b) {
  scale_shift_relu_body(x, y, n, a, b);
}
void scale_shift_relu_plain(const float* x, float* y, int64_t n, float a, float b) {
  scale_shift_relu_body(x, y, n, a, b);
}

}  // namespace

void scale_shift_relu(const float* x, float* y, int64_t n, float a, float b) {
  (has_avx2() ? scale_shift_relu_avx2 : scale_shift_relu_plain)(x, y, n, a, b);
}

namespace {

class BatchNormReluKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    eps_ = info.attr_float("epsilon", 1e-5f);
    bool all = true;
    for (size_t i = 1; i < 5; ++i) all = all && info.const_input(i) != nullptr;
    if (all) {
      std::vector<const Tensor*> p;
      for (size_t i = 1; i < 5; ++i) p.push_back(info.const_input(i));
      Status st = fold(p, eps_, &folded_params_);
      if (!st.ok()) return info.error(st.message());
      folded_ = true;
    }
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    for (size_t i = 0; i < 5; ++i)
      if (!ctx.has_input(i)) return ctx.error("missing input " + std::to_string(i));
    const Tensor& X = ctx.input(0);
    if (X.rank() < 1) return ctx.error("X must have rank >= 1, got " + X.describe());
    Params local;  // parameters given at run time: folded per call (concurrent runs share the kernel)
    const Params* fp = &folded_params_;
    if (!folded_) {
      std::vector<const Tensor*> p;
      for (size_t i = 1; i < 5; ++i) p.push_back(&ctx.input(i));
      Status st = fold(p, eps_, &local);
      if (!st.ok()) return ctx.error(st.message());
      fp = &local;
    }
    const std::vector<double>& a_ = fp->a;
    const std::vector<double>& b_ = fp->b;
    const std::vector<float>& af_ = fp->af;
    const std::vector<float>& bf_ = fp->bf;
    const int64_t N = X.dim(0);
    const int64_t C = X.rank() >= 2 ? X.dim(1) : 1;
    const int64_t plane = (N * C) > 0 ? X.numel() / (N * C) : 0;
    if (static_cast<int64_t>(a_.size()) != C) {
      return ctx.error("parameters have " + std::to_string(a_.size()) + " values, X " + X.describe() + " has " +
                       std::to_string(C) + " channels");
    }
    return dispatch_float(
        X.dtype(),
        [&](auto tag) -> Status {
          using T = decltype(tag);
          NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), X.shape()));
          const T* x = X.data<T>();
          T* y = Y->data<T>();
          ctx.pool().parallel_for(N * C, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, plane)),
                                  [&](int64_t p0, int64_t p1) {
                                    for (int64_t p = p0; p < p1; ++p) {
                                      const int64_t c = p % C;
                                      if constexpr (std::is_same_v<T, float>) {
                                        scale_shift_relu(x + p * plane, y + p * plane, plane, af_[c], bf_[c]);
                                      } else {
                                        reference(x + p * plane, y + p * plane, plane, a_[c], b_[c]);
                                      }
                                    }
                                  });
          return Status::Ok();
        },
        [&] { return ctx.error(std::string("BatchNormRelu does not support dtype ") + dtype_name(X.dtype())); });
  }

  // BatchNormalization's per-plane affine (compute type: double for double, float otherwise), then Relu.
  template <typename T>
  static void reference(const T* x, T* y, int64_t n, double a, double b) {
    using CT = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const CT af = static_cast<CT>(a), bf = static_cast<CT>(b);
    for (int64_t i = 0; i < n; ++i) {
      const T v = static_cast<T>(static_cast<CT>(x[i]) * af + bf);
      y[i] = static_cast<CT>(v) > CT(0) ? v : T(0.f);
    }
  }

 private:
  struct Params {
    std::vector<double> a, b;
    std::vector<float> af, bf;
  };
  static Status fold(const std::vector<const Tensor*>& p, double eps, Params* out) {
    NXRT_RETURN_IF_ERROR(ir::fold_batch_norm(p, eps, &out->a, &out->b));
    out->af.assign(out->a.begin(), out->a.end());
    out->bf.assign(out->b.begin(), out->b.end());
    return Status::Ok();
  }

  double eps_ = 1e-5;
  bool folded_ = false;
  Params folded_params_;
};

}  // namespace



void register_bn_relu(ep::KernelRegistry& r) { r.add_class<BatchNormReluKernel>(ir::kNxrtDomain, "BatchNormRelu"); }

}  // namespace nxrt::ops
