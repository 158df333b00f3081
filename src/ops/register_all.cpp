// The CPU provider's op families. Adding a family: write src/ops/<family>.cpp with its register
// function, declare it here and call it below.
#include "ep/kernel.h"

namespace nxrt::ops {
void register_elementwise_ops(ep::KernelRegistry& r);  // elementwise.cpp: unary/binary math, logic, activations
void register_reduction_ops(ep::KernelRegistry& r);    // reduction.cpp: Reduce*, ArgMax/Min, Softmax family, CumSum
void register_linalg_ops(ep::KernelRegistry& r);       // linalg.cpp: MatMul, Gemm, Einsum, Det, integer matmuls
void register_cast_ops(ep::KernelRegistry& r);         // cast.cpp: Cast, CastLike, quantization
void register_generator_ops(ep::KernelRegistry& r);    // generator.cpp: Constant, ConstantOfShape, Range, EyeLike, random
void register_tensor_ops(ep::KernelRegistry& r);       // tensor.cpp: shape & movement ops
void register_indexing_ops(ep::KernelRegistry& r);     // indexing.cpp: Gather/Scatter family, NonZero, TopK, ...
void register_nn_ops(ep::KernelRegistry& r);           // nn.cpp: Conv, ConvTranspose, pooling, LRN
void register_norm_ops(ep::KernelRegistry& r);         // norm.cpp: BatchNorm, LayerNorm, GroupNorm, ...
void register_control_flow_ops(ep::KernelRegistry& r); // control_flow.cpp: If, Loop, Scan
void register_sequence_ops(ep::KernelRegistry& r);     // sequence.cpp: Sequence*, Optional*
void register_attention_ops(ep::KernelRegistry& r);    // attention.cpp: Attention, RotaryEmbedding, TensorScatter, ...
void register_training_ops(ep::KernelRegistry& r);     // training.cpp: Adagrad, Adam, Momentum, Gradient
void register_signal_ops(ep::KernelRegistry& r);       // signal.cpp: DFT, STFT, windows, MelWeightMatrix
void register_image_decoder_ops(ep::KernelRegistry& r);// image_decoder.cpp: ImageDecoder
void register_bitcast_ops(ep::KernelRegistry& r);      // bitcast.cpp: BitCast
void register_string_ops(ep::KernelRegistry& r);       // strings.cpp: StringConcat, StringSplit, RegexFullMatch, ...
void register_ml_ops(ep::KernelRegistry& r);           // ml.cpp: the ai.onnx.ml domain
void register_contrib_ops(ep::KernelRegistry& r);      // contrib_*.cpp: com.microsoft ops (MatMulNBits, GQA, ...)
}  // namespace nxrt::ops

namespace nxrt::optimizer {
void register_fused_ops(ep::KernelRegistry& r);  // optimizer/fused_kernels.cpp: the internal nxrt domain
}  // namespace nxrt::optimizer

namespace nxrt::ep {
void register_cpu_kernels(KernelRegistry& r) {
  ops::register_elementwise_ops(r);
  ops::register_reduction_ops(r);
  ops::register_linalg_ops(r);
  ops::register_cast_ops(r);
  ops::register_generator_ops(r);
  ops::register_tensor_ops(r);
  ops::register_indexing_ops(r);
  ops::register_nn_ops(r);
  ops::register_norm_ops(r);
  ops::register_control_flow_ops(r);
  ops::register_sequence_ops(r);
  ops::register_attention_ops(r);
  ops::register_training_ops(r);
  ops::register_signal_ops(r);
  ops::register_image_decoder_ops(r);
  ops::register_bitcast_ops(r);
  ops::register_string_ops(r);
  ops::register_ml_ops(r);
  ops::register_contrib_ops(r);
  optimizer::register_fused_ops(r);  // last: it copies some of the defs above into the nxrt domain

  // Elementwise ops whose kernels read element i before writing element i: output 0 may reuse a
  // dying input 0 of the same dtype and shape (the executor checks the rest).
  for (const char* op : {"Abs", "Neg", "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil",
                         "Round", "Sin", "Cos", "Erf", "Softplus", "Softsign", "Elu", "Selu", "LeakyRelu",
                         "HardSigmoid", "HardSwish", "Gelu", "Mish", "Celu", "ThresholdedRelu", "Shrink", "Sign",
                         "Clip", "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "PRelu", "Not",
                         "BitwiseNot", "Atan", "Tan", "Asin", "Acos", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
                         "Swish"}) {
    r.allow_inplace("", op, 0);
  }
}
}  // namespace nxrt::ep
