// The graph optimizer: rewrites an ir::Model before the session plans it.
//
// Levels (SessionOptions::opt_level):
//   kDisabled  nothing.
//   kBasic     constant folding (deterministic ops whose inputs are all constants are evaluated once
//              with the CPU kernels and become initializers; Constant nodes become initializers),
//              Identity / inference Dropout elimination, Shape/Size of statically shaped values,
//              dead-code removal.
//   kAll       blocked DequantizeLinear + MatMul -> com.microsoft MatMulNBits (before folding), basic,
//              then Conv + BatchNormalization, Conv / BatchNormalization + per-channel Mul/Add and scalar
//              affine + 1x1 Conv folding (into W, B / scale, bias), BatchNormalization + Relu ->
//              nxrt::BatchNormRelu (and into a following 1x1 conv), LayerNorm / RMSNorm / GELU /
//              HardSwish / SiLU pattern fusion, attention fusion (MatMul-[scale]-[mask]-Softmax-MatMul ->
//              nxrt::FusedAttention), and Conv/Gemm/MatMul + bias + residual Add + activation fusion
//              (nxrt::FusedConv, nxrt::FusedGemm, nxrt::FusedMatMul).
//
// The passes run in the order of one table (kPasses, optimizer.cpp); pattern passes run on the rewrite
// driver (rewrite.h), one file each under fusions/.
//
// Graph outputs and values read by subgraphs from outer scope are never removed or renamed; If/Loop/
// Scan bodies are optimized too. Fused nodes live in the internal domain "nxrt" (kNxrtDomain), which the
// optimizer imports into the model when it creates one.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "ep/cpu_features.h"
#include "ep/kernel.h"
#include "ir/graph.h"
#include "nxrt/session.h"
#include "nxrt/status.h"

namespace nxrt::optimizer {

using ir::kNxrtDomain;
using ir::kNxrtOpset;

struct Options {
  OptLevel level = OptLevel::kAll;
  // The kernels constant folding evaluates nodes with (the session hands in its provider's registry);
  // without one, nothing is folded.
  const ep::KernelRegistry* registry = nullptr;
  // Constant folding does not materialize an output larger than this.
  int64_t max_folded_bytes = int64_t{64} << 20;
  // ConstantOfShape (weights written as "fill this shape") is folded up to this size.
  int64_t max_constant_of_shape_bytes = int64_t{1} << 30;
  // Passes (kPasses' names, pass_names()) not to run; optimize() rejects a name that is no pass.
  std::vector<std::string> disabled;
  // The kernels' tier (the session's isa override, else the CPU's) and whether they run as the
  // reference (reference=1): layout passes keep to what those kernels take.
  ep::IsaTier isa = ep::cpu_isa_tier();
  bool reference_kernels = false;
};

// Every pass's name, in the order they run.
std::vector<std::string> pass_names();

// What the passes did: pass name -> count (nodes folded, nodes fused, ...).
struct Stats {
  std::map<std::string, int> counts;
  std::map<std::string, double> pass_ms;  // wall time per pass (all graphs, all rounds)
  int total() const {
    int t = 0;
    for (const auto& [k, v] : counts) t += v;
    return t;
  }
  std::string summary() const;
};

// Optimizes `model` in place. Errors only for internal failures; a pass that cannot apply leaves the
// graph as it was.
Status optimize(ir::Model& model, const Options& options, Stats* stats = nullptr);

// SessionOptions::position_selected_outputs (select_positions.cpp): for each named output, a
// per-position projection of a [batch, seq, hidden] value, inserts nxrt::SelectPositions in front of its
// matmul and the graph input `<output>_positions` (int64 [batch, k]); the output becomes [batch, k, n].
// Runs between two rounds of load-time shape inference (it reads the first's facts). An output that is
// not such a projection is a NotImplemented error naming where the walk back from it stopped (an
// unknown output or a taken input name: InvalidArgument); with `optional` that output is left as it was
// instead. Returns the outputs rewritten.
Result<std::vector<std::string>> select_output_positions(ir::Model& model, const std::vector<std::string>& outputs,
                                                         bool optional = false);

// SessionOptions::kv_cache_dtype (kv_cache_dtype.cpp): the past_key / past_value graph inputs of
// float32 com.microsoft::GroupQueryAttention nodes, and their present graph outputs, become `dtype`
// (float16 only; anything else is InvalidArgument). A node is rewritten whole or not at all (its pasts
// read only by such nodes, its presents read by no node). Run between two rounds of load-time shape
// inference (it reads the first's dtypes). Returns the inputs and outputs retyped (none: the model has
// no such cache, or it is float16 already).
Result<std::vector<std::string>> retype_attention_caches(ir::Model& model, DataType dtype);

// SessionOptions::matmulnbits_scale_dtype (nbits_scale_dtype.cpp): each com.microsoft::MatMulNBits
// node's float32 block scales rounded to the nearest float16 value (they stay float32 tensors), so the
// kernels pack 2-byte scales (float16 only; anything else is InvalidArgument). A node keeps its scales
// when one is outside float16's normal range or the scales are not a float32 initializer read only as
// MatMulNBits scales. Idempotent. The session runs it before the optimizer (whose fusions carry the
// scales into nxrt's fused MatMulNBits ops) and again after it (MatMulNBits nodes the optimizer made
// from DequantizeLinear + MatMul). Counts: the MatMulNBits nodes, those whose scales it rounded, and
// those whose scales were float16 values already (a node sharing a tensor seen before counts there).
// `replaced`: the tensors the rounded copies replaced, for the caller to release (bytes borrowed from
// the model's file mapping stay resident until told otherwise).
struct NbitsScalesRounded {
  int nodes = 0;
  int rounded = 0;
  int float16 = 0;
  std::vector<Tensor> replaced;
};
Result<NbitsScalesRounded> round_matmulnbits_scales(ir::Model& model, DataType dtype);

// Reads NXRT_OPT_LEVEL (disabled|basic|all, or 0|1|2); returns `dflt` when unset, an error naming the
// value when it is not one of those.
Result<OptLevel> opt_level_from_env(OptLevel dflt);

}  // namespace nxrt::optimizer
