// The optimizer's passes. Each rewrites one graph (GraphInfo) and returns the number of rewrites it
// made; optimizer.cpp runs them in the order of its pass table. Pattern passes run on the rewrite
// driver (rewrite.h), one file each under fusions/.
#pragma once
#include "optimizer/graph_util.h"

namespace nxrt::optimizer {

// ---- basic ----
// float16 / bfloat16 nodes of the listed ops compute in float32: widening Casts where float16 values
// enter, rounding Casts where values leave for readers that stay float16 (float16_in_float32.cpp).
int compute_float16_in_float32(PassContext& pc, GraphInfo& gi);
// (basic_passes.cpp)
// Deterministic nodes whose inputs are all constants are evaluated once with the CPU kernels and
// become initializers (Constant nodes too).
int fold_constants(PassContext& pc, GraphInfo& gi);
// Identity and inference Dropout: readers read the input instead.
int eliminate_identities(PassContext& pc, GraphInfo& gi);
// Shape / Size of a statically shaped value become initializers.
int fold_shapes(PassContext& pc, GraphInfo& gi);
// Nodes nobody reads, then initializers nobody reads.
int remove_dead_code(PassContext& pc, GraphInfo& gi);

// ---- all (fusions/<pass>.cpp) ----
// Blocked int4/uint4/int8/uint8 DequantizeLinear of a constant [K, N] weight feeding MatMul's B input:
// rewritten into com.microsoft MatMulNBits. Runs before constant folding.
int fuse_dq_matmul(PassContext& pc, GraphInfo& gi);
// The QuantizeLinear / DequantizeLinear groups of a QDQ model (DequantizeLinear inputs -> Conv, MatMul,
// Gemm, Add, Mul, pools, Concat, ... -> QuantizeLinear) -> the 8-bit op (QLinearConv, QLinearMatMul,
// com.microsoft QGemm, QLinearAdd, ...), or the op itself on 8-bit values where it only moves them.
// Runs before constant folding.
int fuse_qdq(PassContext& pc, GraphInfo& gi);
int fuse_qdq_table(PassContext& pc, GraphInfo& gi);  // QDQ float elementwise chains -> nxrt::ByteTable
// 8-bit conv chains channels-last: eligible QLinearConv -> com.microsoft QLinearConv channels_last = 1
// between Transposes, channels-last values kept across QLinearAdd / QLinearMul / QLinearConcat /
// QLinearGlobalAveragePool and between convs (no Transpose back and forth).
int qlinear_channels_last(PassContext& pc, GraphInfo& gi);
// com.microsoft MatMulNBits nodes reading the same A with the same K, bits, block and accuracy level
// (q/k/v, gate/up): one nxrt::MatMulNBitsSplit over their weights stacked along N, one output each.
int fuse_sibling_matmulnbits(PassContext& pc, GraphInfo& gi);
// A stacked gate/up pair that only nxrt::SiluMul reads: one nxrt::MatMulNBitsSiluMul writing the product.
int fuse_matmulnbits_silu_mul(PassContext& pc, GraphInfo& gi);
// MatMulInteger -> Cast(float) -> Mul(Mul(a_scale, b_scale)) [-> Add(bias)] (ORT's quantize_dynamic
// pattern) -> com.microsoft::MatMulIntegerToFloat.
int fuse_matmul_integer_to_float(PassContext& pc, GraphInfo& gi);
// 1x1 Conv / nxrt::FusedConv nodes reading the same X with the same attributes: one convolution over
// their weights stacked along the output channels, then a Split of its output (views at batch 1).
int fuse_sibling_pointwise_conv(PassContext& pc, GraphInfo& gi);
// Conv followed by inference BatchNormalization: folded into W and B.
int fold_conv_bn(PassContext& pc, GraphInfo& gi);
// Conv followed by Mul / Add of a per-output-channel constant: folded into W and B.
int fold_conv_affine(PassContext& pc, GraphInfo& gi);
// BatchNormalization followed by Mul / Add of a per-channel constant: folded into its scale and bias.
int fold_bn_affine(PassContext& pc, GraphInfo& gi);
// Scalar Mul / Add feeding an unpadded 1x1 Conv: folded into its W and B.
int fold_affine_into_pointwise_conv(PassContext& pc, GraphInfo& gi);
// BatchNormalization + Relu -> nxrt::BatchNormRelu.
int fuse_bn_relu(PassContext& pc, GraphInfo& gi);
// ReduceMean-Sub-Pow-ReduceMean-Add-Sqrt-Div-Mul[-Add] -> nxrt::LayerNormalization.
int fuse_layer_norm(PassContext& pc, GraphInfo& gi);
// Pow-ReduceMean-Add-Sqrt-Div (or Reciprocal-Mul)-Mul -> nxrt::RMSNormalization.
int fuse_rms_norm(PassContext& pc, GraphInfo& gi);
// The erf and tanh forms of GELU -> nxrt::Gelu.
int fuse_gelu(PassContext& pc, GraphInfo& gi);
// MatMul-[scale]-[mask]-Softmax-MatMul -> nxrt::FusedAttention.
int fuse_attention(PassContext& pc, GraphInfo& gi);
// x * Clip(x + 3, 0, 6) / 6 -> nxrt::HardSwish.
int fuse_hard_swish(PassContext& pc, GraphInfo& gi);
// x * Sigmoid(x) -> nxrt::Swish.
int fuse_silu(PassContext& pc, GraphInfo& gi);
// Conv / Gemm / MatMul + bias + residual Add + activation -> nxrt::FusedConv / FusedGemm / FusedMatMul.
int fuse_activation(PassContext& pc, GraphInfo& gi);
// nxrt::BatchNormRelu read only by a 1x1 conv: moved into the conv's input packing.
int fuse_preact_conv(PassContext& pc, GraphInfo& gi);
// Reshape-Transpose-Reshape channel shuffle read only by a depthwise conv: read through the shuffle there.
int fuse_channel_shuffle(PassContext& pc, GraphInfo& gi);
// A 2-D float Conv / FusedConv read only by a MaxPool -> nxrt::ConvMaxPool (fuse_conv_max_pool.cpp).
int fuse_conv_max_pool(PassContext& pc, GraphInfo& gi);

}  // namespace nxrt::optimizer
