// The CPU provider's op families. Adding a family: write src/ops/<family>/<family>.cpp with its
// register function, declare it here and call it below.
#include "ops/cpu_provider.h"

#include "shape/op_schema.h"

namespace nxrt::ops {
void register_elementwise_ops(ep::KernelRegistry& r);  // elementwise/elementwise.cpp: unary/binary math, logic, activations
void register_reduction_ops(ep::KernelRegistry& r);    // reduction/: Reduce*, ArgMax/Min, Softmax family, CumSum
void register_linalg_ops(ep::KernelRegistry& r);       // linalg/: MatMul, Gemm, Einsum, Det, integer matmuls
void register_cast_ops(ep::KernelRegistry& r);         // cast/cast.cpp: Cast, CastLike, quantization
void register_generator_ops(ep::KernelRegistry& r);    // generator/: Constant, ConstantOfShape, Range, EyeLike, random
void register_tensor_ops(ep::KernelRegistry& r);       // tensor/tensor.cpp: shape & movement ops
void register_indexing_ops(ep::KernelRegistry& r);     // tensor/indexing.cpp: Gather/Scatter family, NonZero, TopK, ...
void register_conv_kernels(ep::KernelRegistry& r);     // conv/conv_ops.cpp: Conv, ConvTranspose, ConvInteger, ...
void register_pool_kernels(ep::KernelRegistry& r);     // pool/pool_ops.cpp: pooling, LRN
void register_rnn_kernels(ep::KernelRegistry& r);      // rnn/rnn.cpp: RNN, GRU, LSTM
void register_norm_ops(ep::KernelRegistry& r);         // norm/norm.cpp: BatchNorm, LayerNorm, GroupNorm, ...
void register_control_flow_ops(ep::KernelRegistry& r); // control_flow/control_flow.cpp: If, Loop, Scan
void register_sequence_ops(ep::KernelRegistry& r);     // control_flow/sequence_optional.cpp: Sequence*, Optional*
void register_attention_ops(ep::KernelRegistry& r);    // attention/: Attention, RotaryEmbedding, TensorScatter, ...
void register_training_ops(ep::KernelRegistry& r);     // training/training.cpp: Adagrad, Adam, Momentum, Gradient
void register_signal_ops(ep::KernelRegistry& r);       // signal/signal.cpp: DFT, STFT, windows, MelWeightMatrix
void register_image_decoder_ops(ep::KernelRegistry& r);// image/image_decoder.cpp: ImageDecoder
void register_bitcast_ops(ep::KernelRegistry& r);      // elementwise/bitcast.cpp: BitCast
void register_string_ops(ep::KernelRegistry& r);       // strings/: StringConcat, StringSplit, RegexFullMatch, ...
void register_ml_ops(ep::KernelRegistry& r);           // ml/: the ai.onnx.ml domain
void register_contrib_ops(ep::KernelRegistry& r);      // contrib/: com.microsoft ops (MatMulNBits, GQA, ...)
void register_fused_ops(ep::KernelRegistry& r);        // fused/: the internal nxrt domain

void register_cpu_kernels(ep::KernelRegistry& r) {
  register_elementwise_ops(r);
  register_reduction_ops(r);
  register_linalg_ops(r);
  register_cast_ops(r);
  register_generator_ops(r);
  register_tensor_ops(r);
  register_indexing_ops(r);
  register_conv_kernels(r);
  register_pool_kernels(r);
  register_rnn_kernels(r);
  register_norm_ops(r);
  register_control_flow_ops(r);
  register_sequence_ops(r);
  register_attention_ops(r);
  register_training_ops(r);
  register_signal_ops(r);
  register_image_decoder_ops(r);
  register_bitcast_ops(r);
  register_string_ops(r);
  register_ml_ops(r);
  register_contrib_ops(r);
  register_fused_ops(r);  // last: it copies some of the defs above into the nxrt domain

  // Output 0 may reuse a dying input of the same dtype and shape where the op's schema names one (the
  // executor checks the rest). Every CPU kernel of such an op reads element i before writing element i.
  for (const shape::OpSchema& s : shape::all_schemas()) {
    if (s.inplace_input >= 0) r.allow_inplace(s.domain, s.op_type, s.inplace_input);
  }
}

std::shared_ptr<const ep::KernelRegistry> cpu_provider_registry() {
  static const std::shared_ptr<const ep::KernelRegistry> registry = [] {
    auto r = std::make_shared<ep::KernelRegistry>();
    register_cpu_kernels(*r);
    return r;
  }();
  return registry;
}

}  // namespace nxrt::ops
