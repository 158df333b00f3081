// Level-all pass: blocked DequantizeLinear of a constant weight feeding MatMul's B input, rewritten into
// com.microsoft MatMulNBits (as onnxruntime's DQ+MatMul -> MatMulNBits fusion does).
//
// Pattern (every constant an initializer the caller cannot override):
//   W = DequantizeLinear(x: int4|uint4|int8|uint8 [K, N], scale: float32|float16 [ceil(K/bs), N],
//                        zero_point?: x's dtype, scale's shape, axis = 0 (or -2), block_size = bs,
//                        bs a power of two >= 16, output float32 or float16 (not float16 from float32 scales))
//   Y = MatMul(A, W)
// becomes
//   Y = com.microsoft::MatMulNBits(A, B', scales', zero_points'?) with K, N, bits, block_size = bs,
//                                  accuracy_level = 0 (float computation, as the unfused graph),
// where B' is uint8 [N, k_blocks, bs * bits / 8] (element k of a block at bit k * bits, low bits first),
// scales' [N * k_blocks] in the output type (the transposed scales) and zero_points' uint8
// [N, ceil(k_blocks * bits / 8)] packed the same way. MatMulNBits stores unsigned codes with a default zero point of 2^(bits-1):
// signed weights are stored as code + 2^(bits-1) with zero point zp + 2^(bits-1) (so no zero-point input
// when DequantizeLinear's zero point is absent), unsigned ones as they are with their zero point written
// explicitly (DequantizeLinear's default 0 differs from MatMulNBits's). The padding of a last partial
// block holds the zero point's code, so it dequantizes to 0.
//
// Both compute (code - zero point) * scale with the integer difference exact, so with float32 the fused
// result differs from the unfused one only by the summation order of the matrix product; with float16
// the fused weights skip DequantizeLinear's rounding of each weight to float16 (the kernel computes in
// float32 and rounds the result).
//
// A following bias Add is left alone: MatMulNBits's bias input is read into a fresh vector per run, and
// the separate Add runs allocation-free in the planned buffers.
//
// Every MatMul that reads the dequantized tensor as B is rewritten (sharing one set of new initializers);
// the DequantizeLinear stays when anything else reads its output (dead-code removal drops it otherwise).
// The pass runs before constant folding, which would otherwise materialize the float weights.
#include <algorithm>
#include <cstring>

#include "ir/float8_types.h"
#include "nxrt/float_types.h"
#include "optimizer/passes.h"
#include "optimizer/rewrite.h"

namespace nxrt::optimizer {

namespace {

constexpr const char* kMsDomain = "com.microsoft";

// Weights of one matched DequantizeLinear in MatMulNBits's layout.
struct Packed {
  std::string b, scales, zp;  // initializer names (zp empty: MatMulNBits's default)
  int64_t K = 0, N = 0, bits = 0, block = 0;
};

// Checks the DequantizeLinear side of the pattern; fills the weight facts. Returns false to refuse.
bool match_dq(PassContext& pc, GraphInfo& gi, const ir::Node& dq, const Tensor** x, const Tensor** scale,
              const Tensor** zp, int64_t* block, DataType* out_t) {
  if (!is_onnx(&dq, "DequantizeLinear") || dq.inputs.size() < 2 || dq.inputs.size() > 3) return false;
  if (dq.outputs.size() != 1 || dq.outputs[0].empty()) return false;
  if (pc.opset("") < 21) return false;  // block_size exists from opset 21
  *x = gi.constant(dq.inputs[0]);
  *scale = dq.inputs[1].empty() ? nullptr : gi.constant(dq.inputs[1]);
  *zp = nullptr;
  if (dq.inputs.size() == 3 && !dq.inputs[2].empty()) {
    *zp = gi.constant(dq.inputs[2]);
    if (!*zp) return false;
  }
  if (!*x || !*scale) return false;
  const DataType xt = (*x)->dtype();
  if (xt != DataType::kInt4 && xt != DataType::kUInt4 && xt != DataType::kInt8 && xt != DataType::kUInt8) return false;
  if ((*x)->rank() != 2 || !(*x)->is_contiguous()) return false;
  const int64_t K = (*x)->dim(0), N = (*x)->dim(1);
  if (K <= 0 || N <= 0) return false;
  int64_t axis = attr_i(dq, "axis", 1);
  if (axis < 0) axis += 2;
  if (axis != 0) return false;
  const int64_t bs = attr_i(dq, "block_size", 0);
  if (bs < 16 || (bs & (bs - 1)) != 0) return false;
  // Output (= MatMul's A and MatMulNBits's T1) float32 or float16; the scales become T1, so float32
  // scales with a float16 output (DequantizeLinear rounding each weight to float16) are refused.
  const DataType st = (*scale)->dtype();
  const int64_t odt = attr_i(dq, "output_dtype", 0);
  *out_t = odt != 0 ? static_cast<DataType>(odt) : st;
  if (st != DataType::kFloat && st != DataType::kFloat16) return false;
  if (*out_t != DataType::kFloat && *out_t != DataType::kFloat16) return false;
  if (st == DataType::kFloat && *out_t == DataType::kFloat16) return false;
  if (!(*scale)->is_contiguous()) return false;
  const int64_t kb = (K + bs - 1) / bs;
  if ((*scale)->shape() != Dims{kb, N}) return false;
  if (*zp && ((*zp)->dtype() != xt || (*zp)->shape() != Dims{kb, N} || !(*zp)->is_contiguous())) return false;
  *block = bs;
  return true;
}

// Element i of a contiguous int4/uint4/int8/uint8 tensor as an integer.
inline int64_t element(const Tensor& t, const uint8_t* p, int64_t i) {
  switch (t.dtype()) {
    case DataType::kInt4: return subbyte_get(p, i, 4, true);
    case DataType::kUInt4: return subbyte_get(p, i, 4, false);
    case DataType::kInt8: return static_cast<int8_t>(p[i]);
    default: return p[i];
  }
}

// Builds the MatMulNBits initializers for a matched DequantizeLinear.
Packed pack(PassContext& pc, ir::Graph& g, const Tensor& x, const Tensor& scale, const Tensor* zp, int64_t block,
            DataType out_t) {
  Packed P;
  P.K = x.dim(0);
  P.N = x.dim(1);
  P.block = block;
  const bool is4 = x.dtype() == DataType::kInt4 || x.dtype() == DataType::kUInt4;
  const bool sgn = x.dtype() == DataType::kInt4 || x.dtype() == DataType::kInt8;
  P.bits = is4 ? 4 : 8;
  const int64_t offset = sgn ? int64_t{1} << (P.bits - 1) : 0;  // stored code = value + offset
  const int64_t dflt_zp = int64_t{1} << (P.bits - 1);           // MatMulNBits's default (stored domain)
  const int64_t K = P.K, N = P.N, kb = (K + block - 1) / block, blob = block * P.bits / 8;
  const uint8_t* xp = x.data<uint8_t>();
  const uint8_t* zpp = zp ? zp->data<uint8_t>() : nullptr;

  // Zero points in the stored domain, [N, kb].
  std::vector<uint8_t> z(static_cast<size_t>(N * kb));  // 0..2^bits-1
  bool all_default = true;
  for (int64_t j = 0; j < kb; ++j)
    for (int64_t n = 0; n < N; ++n) {
      const int64_t v = (zpp ? element(*zp, zpp, j * N + n) : 0) + offset;
      z[static_cast<size_t>(n * kb + j)] = static_cast<uint8_t>(v);
      all_default &= v == dflt_zp;
    }

  Tensor B(DataType::kUInt8, Dims{N, kb, blob});
  uint8_t* bp = B.data<uint8_t>();  // every byte written below
  // x is [K, N] row-major, B [N, kb, blob]: a transpose, done in tiles of 64 columns so that both the
  // reads (along n) and the writes (along k) stay in cache.
  constexpr int64_t kTile = 64;
  if (P.bits == 4) {
    // Two k per output byte. A nibble's stored code is the nibble itself (uint4) or nibble ^ 8 (int4:
    // two's complement v in [-8, 7] -> v + 8).
    const uint32_t flip = sgn ? 8u : 0u;
    auto nib = [&](int64_t idx) -> uint32_t { return ((xp[idx >> 1] >> ((idx & 1) << 2)) & 15u) ^ flip; };
    for (int64_t j = 0; j < kb; ++j) {
      for (int64_t n0 = 0; n0 < N; n0 += kTile) {
        const int64_t n1 = std::min(N, n0 + kTile);
        for (int64_t e = 0; e < block; e += 2) {
          const int64_t k = j * block + e;
          for (int64_t n = n0; n < n1; ++n) {
            const uint32_t pad = z[static_cast<size_t>(n * kb + j)];  // padding dequantizes to 0
            const uint32_t lo = k < K ? nib(k * N + n) : pad;
            const uint32_t hi = k + 1 < K ? nib((k + 1) * N + n) : pad;
            bp[(n * kb + j) * blob + e / 2] = static_cast<uint8_t>(lo | (hi << 4));
          }
        }
      }
    }
  } else {
    for (int64_t j = 0; j < kb; ++j) {
      for (int64_t n0 = 0; n0 < N; n0 += kTile) {
        const int64_t n1 = std::min(N, n0 + kTile);
        for (int64_t e = 0; e < block; ++e) {
          const int64_t k = j * block + e;
          for (int64_t n = n0; n < n1; ++n) {
            const uint32_t code = k < K ? static_cast<uint32_t>(element(x, xp, k * N + n) + offset)
                                        : z[static_cast<size_t>(n * kb + j)];  // padding dequantizes to 0
            bp[(n * kb + j) * blob + e] = static_cast<uint8_t>(code);
          }
        }
      }
    }
  }
  // Scales transposed to [N, kb], in the output type (float16 -> float32 is exact).
  Tensor S(out_t, Dims{N * kb});
  if (scale.dtype() == out_t) {
    const size_t es = out_t == DataType::kFloat ? 4 : 2;
    const uint8_t* sp = scale.data<uint8_t>();
    uint8_t* so = S.data<uint8_t>();
    for (int64_t j = 0; j < kb; ++j)
      for (int64_t n = 0; n < N; ++n) std::memcpy(so + (n * kb + j) * es, sp + (j * N + n) * es, es);
  } else {  // float16 scales, float32 output
    const Float16* sp = scale.data<Float16>();
    float* so = S.data<float>();
    for (int64_t j = 0; j < kb; ++j)
      for (int64_t n = 0; n < N; ++n) so[n * kb + j] = static_cast<float>(sp[j * N + n]);
  }

  P.b = pc.fresh_name(g, "mnb_B");
  g.initializers[P.b] = std::move(B);
  P.scales = pc.fresh_name(g, "mnb_scales");
  g.initializers[P.scales] = std::move(S);
  if (!all_default) {
    const int64_t zrow = (kb * P.bits + 7) / 8;
    Tensor Z(DataType::kUInt8, Dims{N * zrow});
    uint8_t* zo = Z.data<uint8_t>();
    std::memset(zo, 0, Z.nbytes());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < kb; ++j) {
        const uint32_t v = static_cast<uint32_t>(z[static_cast<size_t>(n * kb + j)]);
        if (P.bits == 8) zo[n * zrow + j] = static_cast<uint8_t>(v);
        else subbyte_set(zo + n * zrow, j, 4, v);
      }
    P.zp = pc.fresh_name(g, "mnb_zero_points");
    g.initializers[P.zp] = std::move(Z);
  }
  return P;
}

struct DqMatMul : Match {
  const Tensor *x = nullptr, *scale = nullptr, *zp = nullptr;
  int64_t block = 0;
  DataType out_t = DataType::kFloat;
  std::vector<int> targets;  // the MatMuls reading the dequantized weight as B
};

// Every MatMul that reads the dequantized tensor as B is taken (and rewritten in place: same position,
// same output); the DequantizeLinear too when nothing else reads its output.
bool match(Rewriter& rw, int anchor, DqMatMul& m) {
  const ir::Node& dq = rw.node(anchor);
  if (!match_dq(rw.pc, rw.gi, dq, &m.x, &m.scale, &m.zp, &m.block, &m.out_t)) return false;
  const std::string& w = dq.outputs[0];
  auto it = rw.gi.consumers.find(w);
  if (it == rw.gi.consumers.end()) return false;
  for (int c : it->second) {
    const ir::Node& mm = rw.node(c);
    if (!is_onnx(&mm, "MatMul") || mm.inputs.size() != 2 || mm.outputs.size() != 1 || mm.outputs[0].empty()) continue;
    if (mm.inputs[1] != w || mm.inputs[0] == w || mm.inputs[0].empty()) continue;
    if (std::find(m.targets.begin(), m.targets.end(), c) == m.targets.end()) m.targets.push_back(c);  // listed once
  }
  if (m.targets.empty()) return false;
  m.nodes = m.targets;
  // Removed here rather than by dead-code removal: constant folding would otherwise materialize it first.
  // (The quantized initializers of removed DequantizeLinears go with dead-code removal.)
  if (!rw.gi.protected_names.count(w) && rw.gi.num_uses(w) == static_cast<int>(m.targets.size())) m.take(anchor);
  return true;
}

bool build(Rewriter& rw, const DqMatMul& m, Rewrite& r) {
  const Packed P = pack(rw.pc, rw.g, *m.x, *m.scale, m.zp, m.block, m.out_t);
  int n = rw.done();
  for (int c : m.targets) {
    const ir::Node& mm = rw.node(c);
    std::vector<std::string> inputs = {mm.inputs[0], P.b, P.scales};
    if (!P.zp.empty()) inputs.push_back(P.zp);
    r.replace(c, make_node(mm.name.empty() ? "MatMulNBits_" + std::to_string(n) : mm.name + "_nbits", kMsDomain,
                           "MatMulNBits", std::move(inputs), {mm.outputs[0]},
                           {make_attr_i("K", P.K), make_attr_i("N", P.N), make_attr_i("bits", P.bits),
                            make_attr_i("block_size", P.block), make_attr_i("accuracy_level", 0)}));
    ++n;
  }
  r.count = static_cast<int>(m.targets.size());
  return true;
}

// DequantizeLinear's block_size exists from opset 21.
const Fusion<DqMatMul> kDqMatMul{.stat = "fused_dq_matmul", .anchor = {{"DequantizeLinear"}}, .min_opset = 21,
                                 .match = match, .build = build, .domain = kMsDomain, .domain_version = 1};

}  // namespace

int fuse_dq_matmul(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kDqMatMul); }

}  // namespace nxrt::optimizer
