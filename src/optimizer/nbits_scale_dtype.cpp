// SessionOptions::matmulnbits_scale_dtype: com.microsoft::MatMulNBits block scales rounded to float16.
//
// Why: a decode step streams every packed record of an LLM's int4 weights once, so the bytes per
// weight set the step's time on a machine whose memory is the limit. With block 32 a record holds
// 16 bytes of codes per column and 4 of float32 scale (2 of float16). The packing keeps 2-byte scales
// whenever every scale of a node already is a float16 value (pack_quant_panels: lossless), as in an
// export of a float16 model; an export of a float32 model has float32 scales that are not, so its
// records carry 4-byte ones: a Qwen2.5-0.5B-shape step reads 322 MB instead of 291. llama.cpp's Q4_0
// holds its scales in fp16.
//
// Rounding each scale to the nearest float16 (a relative change of at most 2^-11, against 4-bit codes
// whose own step is 1/15 of a block's range) makes them float16 values: the node keeps float32 scales,
// the graph stays valid ONNX (the optimized-model dump is the rounded model), and the kernels then pack
// 2-byte scales. It is the caller's choice, off by default: outputs move by about that rounding.
//
// A node keeps its scales when any of them is outside float16's normal range (nonzero below 2^-14,
// where float16 keeps fewer bits, or above 65504), or the scales are not a float32 initializer read
// only as MatMulNBits scales (a graph input's default a feed may replace, or a tensor other nodes
// read too).
#include <sys/mman.h>

#include <cmath>
#include <memory>
#include <unordered_set>

#include "nxrt/float_types.h"
#include "optimizer/graph_util.h"
#include "optimizer/optimizer.h"

namespace nxrt::optimizer {

namespace {

bool is_matmulnbits(const ir::Node& n) {
  return ir::canonical_domain(n.domain) == "com.microsoft" && n.op_type == "MatMulNBits";
}

// Every value is 0 or of a magnitude float16 holds as a normal number (or the tensor is empty).
bool fits_float16_normals(const float* s, int64_t count) {
  constexpr float kMinNormal = 6.103515625e-05f;  // 2^-14
  constexpr float kMax = 65504.f;
  for (int64_t i = 0; i < count; ++i) {
    const float a = std::fabs(s[i]);
    if (!(a == 0.f || (a >= kMinNormal && a <= kMax))) return false;  // NaN fails too
  }
  return true;
}

// A float32 tensor in an anonymous mapping of its own (zeroed), unmapped when its last reference goes:
// the copies live until their node's kernel packs them, and memory from malloc's heap would stay with
// the process after that (Qwen2.5-0.5B: 62 MB of scales, peak RSS +58 MB that way).
Tensor mapped_floats(const Dims& shape) {
  const size_t bytes = std::max<size_t>(1, static_cast<size_t>(shape_numel(shape)) * sizeof(float));
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return Tensor(DataType::kFloat, shape);  // malloc then
  std::shared_ptr<void> keep(p, [bytes](void* q) { munmap(q, bytes); });
  return Tensor::borrow(DataType::kFloat, shape, p, std::move(keep));
}

}  // namespace

Result<NbitsScalesRounded> round_matmulnbits_scales(ir::Model& model, DataType dtype) {
  if (dtype != DataType::kFloat16) {
    return invalid_argument(std::string("matmulnbits_scale_dtype: only float16 can be chosen (or the model's own), got ") +
                            dtype_name(dtype));
  }
  ir::Graph& g = model.graph;
  GraphInfo gi(g, true, model.ir_version);
  NbitsScalesRounded out;
  std::unordered_set<std::string> done;
  for (const ir::Node& n : g.nodes) {
    if (!is_matmulnbits(n) || n.inputs.size() < 3 || n.inputs[2].empty()) continue;
    ++out.nodes;
    const std::string& name = n.inputs[2];
    if (done.count(name)) {
      ++out.float16;  // a scales tensor another MatMulNBits node shares, seen already
      continue;
    }
    const Tensor* s = gi.constant(name);
    if (!s || s->dtype() != DataType::kFloat || gi.protected_names.count(name)) continue;
    bool only_scales = true;
    for (int ci : gi.consumers.at(name)) {
      const ir::Node& c = g.nodes[static_cast<size_t>(ci)];
      for (size_t k = 0; k < c.inputs.size(); ++k)
        if (c.inputs[k] == name && !(is_matmulnbits(c) && k == 2)) only_scales = false;
    }
    if (!only_scales) continue;
    const int64_t count = s->numel();
    const float* src = s->data<float>();
    if (!fits_float16_normals(src, count)) continue;
    done.insert(name);
    bool exact = true;
    for (int64_t i = 0; i < count && exact; ++i) exact = half_to_float(float_to_half(src[i])) == src[i];
    if (exact) {
      ++out.float16;  // float16 values already (a float16 export's, or rounded by an earlier call)
      continue;
    }
    Tensor r = mapped_floats(s->shape());
    float* dst = r.data<float>();
    for (int64_t i = 0; i < count; ++i) dst[i] = half_to_float(float_to_half(src[i]));
    out.replaced.push_back(std::move(g.initializers[name]));
    g.initializers[name] = std::move(r);
    ++out.rounded;
  }
  return out;
}

}  // namespace nxrt::optimizer
