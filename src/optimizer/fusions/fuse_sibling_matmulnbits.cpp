// Level-all pass: com.microsoft MatMulNBits nodes that read the same A with the same K, bits, block
// size and accuracy level (a decoder layer's q, k and v projections; an MLP's gate and up) become one
// nxrt::MatMulNBitsSplit over their weights stacked along N, whose outputs are the siblings' outputs:
//
//   Yq = MatMulNBits(A, Bq, Sq[, Zq]) (N = Nq)
//   Yk = MatMulNBits(A, Bk, Sk[, Zk]) (N = Nk)   ->   Yq, Yk, Yv = nxrt::MatMulNBitsSplit(A, Bq, Sq, Zq, Bk, Sk, Zk, Bv, Sv, Zv)
//   Yv = MatMulNBits(A, Bv, Sv[, Zv]) (N = Nv)            (N = Nq + Nk + Nv, splits = [Nq, Nk, Nv])
//   [Yq' = Add(Yq, bias_q) ...]                           [..., bias_q, bias_k, bias_v]: outputs Yq', ...
//
// Why: each MatMulNBits quantizes its A to int8 (accuracy_level 4) once per call, and at 2+ threads each
// call is a parallel loop with its own hand-off and join. A decode step's k and v projections (N = 128
// at Qwen2.5-0.5B, 64 KB of weights each) are too small to split over two threads with profit, and q
// (N = 896, 28 panels) splits 4:3 into tasks; one loop over 1152 columns does all three. Measured on the
// Zen 5 (2 vCPUs, AVX-512 VNNI) on the Qwen2.5-0.5B-shape folder, prompt 512: decode step -4% at 2
// threads and -1.5% at 1 (in-process paired steps, both orders), prefill +2-3% tok/s.
//
// Every MatMulNBits input is stored per output column n (B [N, k_blocks, blob], scales [N * k_blocks],
// zero points [N * ceil(k_blocks * bits / 8)]), so the kernel stacks the siblings' initializers along N
// by concatenating their bytes while it packs them (the stacked copy lives only that long; the
// siblings' own initializers, mapped from the file, are dropped by the session once packed: no weight
// bytes are added to the peak). Each column of the stacked product comes from the same packed weights,
// the same quantized A and the same tile as before: the outputs have the siblings' bits. The kernel
// writes each panel's columns straight into their output (no product buffer, no split copy: a Split
// node after one MatMulNBits over concatenated initializers copied 20 MB per layer in a 512-token
// prefill, lost 7% there, and the concatenated copies raised the peak RSS by 96 MB).
//
// A float32 bias Add that alone reads a sibling's product (Qwen's q/k/v biases) goes into the stacked
// node too: output i is then the Add's sum, the bias input 1 + 3n + i, and the kernel adds it to the
// float product as the Add did (same bits), minus a node and its hand-off per projection (3 per layer):
// decode step -2.6% at 2 threads and -0.7% at 1 (same folder and machine, paired steps, both orders).
//
// Taken: the column-panel path (accuracy_level 4, 4-bit codes, uint8 or no zero points), every input
// but A a constant (initializer), no g_idx, no bias input, one output; siblings agree on the dtypes of B and
// scales and on whether zero points are given; each output but the last a multiple of 32 columns (the
// widest panel), so every panel belongs to one output; at most 8 outputs. The stacked node takes the
// first sibling's place in node order (A is computed there, and every reader of a sibling comes after
// it).
#include "optimizer/passes.h"
#include "optimizer/rewrite.h"

namespace nxrt::optimizer {

namespace {

constexpr const char* kMsDomain = "com.microsoft";
constexpr size_t kMaxStacked = 8;  // nxrt::MatMulNBitsSplit's most outputs

// What two MatMulNBits must share to be stacked (4-bit codes, accuracy_level 4 and uint8 B always).
struct NBitsKey {
  std::string a;
  int64_t K = 0, block = 0;
  DataType s_t = DataType::kUndefined, z_t = DataType::kUndefined;  // z: kUndefined = no zero points
  bool operator==(const NBitsKey& o) const {
    return a == o.a && K == o.K && block == o.block && s_t == o.s_t && z_t == o.z_t;
  }
};

struct NBitsNode {
  NBitsKey key;
  int64_t N = 0;
};

// A MatMulNBits this pass can stack: its facts, or false. Only the column-panel path (accuracy_level 4,
// 4-bit codes, uint8 or no zero points) writes each output directly; elsewhere the kernel would
// compute into a buffer and copy it out.
bool stackable(const Rewriter& rw, const ir::Node& n, NBitsNode* out) {
  if (n.op_type != "MatMulNBits" || ir::canonical_domain(n.domain) != kMsDomain) return false;
  if (n.inputs.size() < 3 || !single_output(n) || n.inputs[0].empty()) return false;
  for (size_t i = 4; i < n.inputs.size(); ++i) {
    if (!n.inputs[i].empty()) return false;  // g_idx, bias
  }
  if (attr_i(n, "bits", 4) != 4 || attr_i(n, "accuracy_level", 0) != 4) return false;
  NBitsNode f;
  f.key.a = n.inputs[0];
  f.key.K = attr_i(n, "K", -1);
  f.N = attr_i(n, "N", -1);
  f.key.block = attr_i(n, "block_size", -1);
  if (f.key.K <= 0 || f.N <= 0 || f.key.block <= 0) return false;
  const Tensor* b = rw.constant(n.inputs[1]);
  const Tensor* s = rw.constant(n.inputs[2]);
  if (!b || !s || !b->is_contiguous() || !s->is_contiguous()) return false;
  const int64_t kb = (f.key.K + f.key.block - 1) / f.key.block;
  if (b->dtype() != DataType::kUInt8 || b->numel() != f.N * kb * (f.key.block / 2)) return false;
  if (s->numel() != f.N * kb) return false;
  f.key.s_t = s->dtype();
  if (n.inputs.size() > 3 && !n.inputs[3].empty()) {
    const Tensor* z = rw.constant(n.inputs[3]);
    if (!z || !z->is_contiguous() || z->dtype() != DataType::kUInt8 || z->numel() != f.N * ((kb * 4 + 7) / 8)) return false;
    f.key.z_t = z->dtype();
  }
  *out = f;
  return true;
}

struct SiblingNBits : Match {
  std::vector<NBitsNode> parts;  // in node order, the anchor first
  // Per part: the Add of a constant bias the stacked node takes in (its sole reader), or -1, and that
  // bias's name.
  std::vector<int> bias_add;
  std::vector<std::string> bias;
};

// The Add that alone reads a float32 product `y` of n columns, adding a float32 constant [n]: its
// index and the bias's name, or -1. Taken into the stacked node, the sum is the same: the kernel adds
// the bias to the float product as Add did.
int bias_add_of(Rewriter& rw, const std::string& y, int64_t n, std::string* bias) {
  int idx = -1;
  const ir::Node* add = rw.sole_reader(y, "Add", &idx);
  if (!add || add->inputs.size() != 2) return -1;
  const std::string b = other_input(*add, y);
  const Tensor* t = b.empty() ? nullptr : rw.constant(b);
  if (!t || t->dtype() != DataType::kFloat || t->rank() != 1 || t->dim(0) != n) return -1;
  *bias = b;
  return idx;
}

// The anchor and every later stackable MatMulNBits reading the same A with the same key.
bool match(Rewriter& rw, int anchor, SiblingNBits& m) {
  NBitsNode first;
  if (!stackable(rw, rw.node(anchor), &first)) return false;
  m.take(anchor);
  m.parts.push_back(first);
  for (int c : rw.later_readers(first.key.a, anchor)) {
    if (m.parts.size() == kMaxStacked) break;
    NBitsNode f;
    if (!stackable(rw, rw.node(c), &f) || !(f.key == first.key)) continue;
    // Each output starts on a panel boundary (the widest panel, 32 columns), so every panel belongs to
    // one output: the parts before this one must end on one.
    if (m.parts.back().N % 32 != 0) break;
    m.take(c);
    m.parts.push_back(f);
  }
  if (m.parts.size() < 2) return false;
  // Biases only on float32 products (MatMulNBits' scales have A's and Y's type): in float16 the Add
  // would round the product first.
  const bool f32 = first.key.s_t == DataType::kFloat;
  for (size_t i = 0; i < m.parts.size(); ++i) {
    std::string b;
    const int add = f32 ? bias_add_of(rw, rw.node(m.nodes[i]).outputs[0], m.parts[i].N, &b) : -1;
    m.bias_add.push_back(add);
    m.bias.push_back(b);
    if (add >= 0) m.take(add);
  }
  return true;
}

bool build(Rewriter& rw, const SiblingNBits& m, Rewrite& r) {
  int64_t n_total = 0;
  std::vector<int64_t> sizes;
  // A, then each sibling's weights, scales and zero points (the kernel stacks them while packing).
  std::vector<std::string> inputs = {m.parts[0].key.a};
  for (size_t i = 0; i < m.parts.size(); ++i) {
    const ir::Node& n = rw.node(m.nodes[i]);
    sizes.push_back(m.parts[i].N);
    n_total += m.parts[i].N;
    inputs.push_back(n.inputs[1]);
    inputs.push_back(n.inputs[2]);
    inputs.push_back(n.inputs.size() > 3 ? n.inputs[3] : std::string());
  }
  for (const std::string& b : m.bias) inputs.push_back(b);  // then each output's bias, if any
  while (inputs.back().empty()) inputs.pop_back();
  const ir::Node& first = rw.node(m.anchor);
  std::vector<ir::Attribute> attrs;
  for (const ir::Attribute& a : first.attributes) {
    if (a.name != "N") attrs.push_back(a);
  }
  attrs.push_back(make_attr_i("N", n_total));
  attrs.push_back(make_attr_is("splits", sizes));
  // Each output is its sibling's, or the sum its bias Add wrote.
  std::vector<std::string> outputs;
  for (size_t i = 0; i < m.parts.size(); ++i) {
    const int c = m.bias_add[i] >= 0 ? m.bias_add[i] : m.nodes[i];
    outputs.push_back(rw.node(c).outputs[0]);
  }
  const std::string name = first.name.empty() ? "MatMulNBits_" + std::to_string(rw.done()) : first.name;
  r.replace(m.anchor, make_node(name + "_stacked", kNxrtDomain, "MatMulNBitsSplit", std::move(inputs),
                                std::move(outputs), std::move(attrs)));
  return true;
}

const Fusion<SiblingNBits> kSiblingNBits{.stat = "fused_sibling_matmulnbits",
                                         .anchor = {{"MatMulNBits"}, {kMsDomain}},
                                         .match = match,
                                         .build = build};

}  // namespace

int fuse_sibling_matmulnbits(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kSiblingNBits); }

}  // namespace nxrt::optimizer
