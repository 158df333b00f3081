// The rewrite driver every optimizer pass that replaces patterns of nodes runs on.
//
// A pass is a Fusion: an anchor (the op types a pattern can start from), a match step (from one anchor
// node, the pattern around it: the nodes it takes and what the replacement needs) and a build step
// (the replacement nodes, new initializers and value renames). The driver walks the graph's nodes in
// order once and owns what every pass used to repeat: skipping nodes an earlier rewrite of the same
// pass took, the opset gate, writing replacements in place, counting, and at the end dropping the
// taken nodes, applying renames and importing the domain the new nodes live in.
//
// The checks on a value a pattern swallows live in one place, Rewriter: the value is read by exactly
// one node input, is not a graph output and is not read from outer scope by a subgraph
// (GraphInfo::single_use), and the node on its other side is not taken yet. A replacement is written
// at the position of a node it replaces (a fusion puts it at its pattern's last node, so every input it
// reads is already computed there) and takes over that node's output names.
#pragma once
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "optimizer/graph_util.h"

namespace nxrt::optimizer {

// What a match takes from the graph: every node the rewrite removes, or replaces when the build
// writes a node at its position. Fusions extend it with what their build step needs.
struct Match {
  int anchor = -1;  // the node the match started from (set by the driver)
  std::vector<int> nodes;
  void take(int index) { nodes.push_back(index); }
};

// What a build step makes of a match.
struct Rewrite {
  std::vector<std::pair<int, ir::Node>> nodes;              // (position of a taken node, its replacement)
  // (position of a taken node, a new node that runs right after the one written there): a replacement
  // of more than one node.
  std::vector<std::pair<int, ir::Node>> after;
  std::vector<std::pair<std::string, std::string>> renames;  // readers of .first read .second instead
  const char* stat = nullptr;  // the Stats key when not the fusion's
  int count = 1;               // rewrites this one stands for in Stats and the pass's result
  void replace(int at, ir::Node n) { nodes.emplace_back(at, std::move(n)); }
  void insert_after(int at, ir::Node n) { after.emplace_back(at, std::move(n)); }
};

// The op types a pattern can start from, in canonical domains ("" is ai.onnx).
struct Anchor {
  std::vector<std::string> ops;             // empty: any op
  std::vector<std::string> domains = {""};  // empty: any domain
  bool accepts(const ir::Node& n) const;
};

// The graph as one pass sees it: the analysis from the pass's start (GraphInfo), the nodes taken by
// rewrites so far, and the pattern checks.
class Rewriter {
 public:
  Rewriter(PassContext& pc, GraphInfo& gi);

  PassContext& pc;
  GraphInfo& gi;
  ir::Graph& g;

  int size() const { return static_cast<int>(g.nodes.size()); }
  ir::Node& node(int i) { return g.nodes[static_cast<size_t>(i)]; }
  bool live(int i) const { return !taken_[static_cast<size_t>(i)]; }
  int64_t opset() const { return pc.opset(""); }  // of ai.onnx
  // Rewrites so far in this pass (names of fused nodes count with it).
  int done() const { return done_; }
  const Tensor* constant(const std::string& name) const { return gi.constant(name); }

  // The live node that alone reads `value` (read once, not a graph output, not captured), else nullptr.
  ir::Node* sole_reader(const std::string& value, int* index = nullptr) const;
  // ... when it is the ai.onnx op `op` with one output.
  ir::Node* sole_reader(const std::string& value, const char* op, int* index = nullptr) const;
  // The live one-output producer of `value` when nothing else reads `value` (read once, not a graph
  // output, not captured), else nullptr.
  ir::Node* sole_producer(const std::string& value, int* index = nullptr) const;
  // ... when it is the ai.onnx op `op`.
  ir::Node* sole_producer(const std::string& value, const char* op, int* index = nullptr) const;

  // The live nodes after node `index` that read `value`, in node order, each once (a pattern that
  // gathers the siblings of a node: the other readers of its input).
  std::vector<int> later_readers(const std::string& value, int index) const;

  // Ranks known without running the graph (infer_ranks), computed at the first call in the pass.
  const std::unordered_map<std::string, int64_t>& ranks();

  // Stores `t` as a new initializer under a fresh name made from `prefix`; returns the name.
  std::string add_initializer(const std::string& prefix, Tensor t);
  // "<anchor name><suffix>", or "<kind>_<rewrites so far>" for an unnamed anchor.
  std::string fused_name(const ir::Node& anchor, const char* kind, const char* suffix) const;
  // The nxrt-domain node `op` that stands for a pattern from node `anchor` to node `last`: named by
  // fused_name, writing the last node's output.
  struct FusedOp {
    const char* kind;
    const char* suffix;
    const char* op;
  };
  ir::Node fused_node(int anchor, int last, const FusedOp& f, std::vector<std::string> inputs,
                      std::vector<ir::Attribute> attributes = {});

  // Driver steps.
  bool all_live(const Match& m) const;
  void apply(const Match& m, Rewrite& r, const char* stat);
  // Drops the taken nodes and applies the renames; imports `domain` (nullptr: none) when anything
  // was rewritten. Returns the rewrite count.
  int finish(const char* domain, int64_t version);

 private:
  std::vector<bool> taken_;
  std::unordered_map<int, std::vector<ir::Node>> inserted_after_;  // Rewrite::after, placed by finish()
  std::unordered_map<std::string, std::string> renames_;
  std::unordered_map<std::string, int64_t> ranks_;
  bool ranks_known_ = false;
  int done_ = 0;
};

// One pattern pass. M is the fusion's Match (derived from Match).
template <class M>
struct Fusion {
  const char* stat;  // Stats key counted per rewrite (a Rewrite may name another)
  Anchor anchor;
  int64_t min_opset = 0;  // below this ai.onnx opset the pass does nothing
  bool (*match)(Rewriter&, int anchor, M&) = nullptr;
  bool (*build)(Rewriter&, const M&, Rewrite&) = nullptr;  // false: refuse after all
  const char* domain = kNxrtDomain;  // the replacements' domain, imported on use (nullptr: none)
  int64_t domain_version = kNxrtOpset;
};

// Runs `f` over the graph once; returns the number of rewrites.
template <class M>
int run_fusion(PassContext& pc, GraphInfo& gi, const Fusion<M>& f) {
  if (f.min_opset > 0 && pc.opset("") < f.min_opset) return 0;
  Rewriter rw(pc, gi);
  for (int i = 0; i < rw.size(); ++i) {
    if (!rw.live(i) || !f.anchor.accepts(rw.node(i))) continue;
    M m;
    m.anchor = i;
    if (!f.match(rw, i, m) || !rw.all_live(m)) continue;
    Rewrite r;
    if (!f.build(rw, m, r)) continue;
    rw.apply(m, r, f.stat);
  }
  return rw.finish(f.domain, f.domain_version);
}

// ---- pattern helpers ----

// For a two-input node with one input `name`, the other input ("" when `name` is not an input or both
// inputs are `name`).
std::string other_input(const ir::Node& n, const std::string& name);
bool is_float_dtype(DataType d);
// A node of `domain`::`op` named `name`.
ir::Node make_node(std::string name, const char* domain, const char* op, std::vector<std::string> inputs,
                   std::vector<std::string> outputs, std::vector<ir::Attribute> attributes = {});

}  // namespace nxrt::optimizer
