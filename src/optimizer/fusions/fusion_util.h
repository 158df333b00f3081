// Pattern pieces more than one fusion matches or builds.
#pragma once
#include <string>
#include <vector>

#include "optimizer/rewrite.h"

namespace nxrt::optimizer {

// An inference BatchNormalization: five inputs, only output 0 used, not in training mode, spatial.
bool inference_batch_norm(const Rewriter& rw, const ir::Node& bn);

// `c` broadcasts per channel against a rank-`rank` value whose axis 1 has `channels` channels (right-
// aligned, 1 on every axis but axis 1): its value for each channel. False otherwise.
bool per_channel_values(const Tensor& c, int64_t rank, int64_t channels, std::vector<double>* per);

// W (float or double, [M, ...]) with output channel m scaled by f[m]. Scaled in place when nothing
// else can see the initializer `w_name` (one reader, not a graph input, storage owned by it alone, e.g.
// a folded ConstantOfShape), else on a copy stored under a fresh name from `prefix`. Returns the name
// of the scaled weight.
std::string scale_output_channels(Rewriter& rw, const std::string& w_name, const Tensor& w,
                                  const std::vector<double>& f, const char* prefix);

// ReduceMean axes (attribute before opset 18, constant input from 18) when they are the last k axes
// written negatively and keepdims is 1: k, else 0.
int reduce_last_axes(const Rewriter& rw, const ir::Node& r);

// A Scale / Bias constant of a normalization over the last k axes: leading size-1 axes dropped, rank
// <= k (so broadcasting it never widened the output).
struct NormParam {
  std::string name;
  size_t lead = 0;  // leading size-1 axes to drop
};
// Checks `name`; its dtype must be a float type equal to *dtype unless that is kUndefined (then set).
bool norm_param(const Rewriter& rw, const std::string& name, int k, DataType* dtype, NormParam* out);
// The value the fused node reads: the constant itself, or its reshaped copy as a new initializer.
std::string norm_param_value(Rewriter& rw, const NormParam& p);

// The nxrt normalization node `f` over the last k axes for a pattern from `anchor` to `last`.
ir::Node norm_node(Rewriter& rw, int anchor, int last, const Rewriter::FusedOp& f, std::vector<std::string> inputs,
                   int k, double eps, DataType dtype);

// The constant weight of a float 1x1, stride-1, unpadded, group-1 conv (Conv, or nxrt::FusedConv
// without a residual or a pre-activation): a plain matrix product over the channels. nullptr otherwise.
const Tensor* pointwise_conv_weight(const Rewriter& rw, const ir::Node& conv);

// A copy of `conv` reading weight `w` and bias `b` (initializer names) instead of its own.
ir::Node with_weights(const ir::Node& conv, const std::string& w, const std::string& b);

// The four constant parameters (scale, B, mean, var) of BatchNormalization-like node `bn`, when they
// are all rank 1 of one length.
bool batch_norm_params(const Rewriter& rw, const ir::Node& bn, std::vector<const Tensor*>* params);

// A QuantizeLinear / DequantizeLinear quantizing per tensor (the QDQ passes): no block_size, its scale
// (input 1) one positive finite float32 constant, its zero point (input 2) absent or one 8-bit constant.
// Sets *scale and *zp (nullptr when absent).
bool qdq_per_tensor(const Rewriter& rw, const ir::Node& n, const Tensor** scale, const Tensor** zp);

}  // namespace nxrt::optimizer
