// Tree ensembles: TreeEnsembleRegressor and TreeEnsembleClassifier (ai.onnx.ml 1 and 3, whose node
// tuples are keyed by (tree id, node id)) and TreeEnsemble (ai.onnx.ml 5, interior nodes and leaves in
// separate arrays, set-membership splits). All three are parsed into one flat form at session creation
// (every id is checked there, so evaluation never indexes out of range) and evaluated in double.
//
// Comparisons: x (the input element, as double) against the split value (float or double attribute, as
// double), which matches comparing in the attribute's own type. A NaN input takes the true branch when
// nodes_missing_value_tracks_true is 1 for the node, else the comparison decides (false except NEQ).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "ops/common.h"
#include "ops/ml/ml_util.h"

namespace nxrt::ops {

namespace {

using ml::PostTransform;

enum Mode : uint8_t { kLeq = 0, kLt, kGte, kGt, kEq, kNeq, kMember, kLeaf };

struct Node {
  Mode mode = kLeaf;
  bool missing_true = false;
  int64_t feature = 0;
  double value = 0;
  int64_t true_child = -1, false_child = -1;  // node indexes
  int64_t begin = 0, end = 0;                // leaf: range in weights_; member: range in members_
};

struct LeafWeight {
  int64_t target;
  double weight;
};

enum class Aggregate { kSum, kAverage, kMin, kMax };

class Forest {
 public:
  std::vector<Node> nodes;
  std::vector<int64_t> roots;
  std::vector<LeafWeight> weights;
  std::vector<double> members;
  int64_t n_targets = 1;
  int64_t max_feature = -1;
  Aggregate agg = Aggregate::kSum;

  // Scores one row into out[n_targets] (aggregated, before base values). Returns false on a cycle.
  bool score(const double* x, double* out, std::vector<uint8_t>* has) const {
    std::fill(out, out + n_targets, 0.0);
    std::fill(has->begin(), has->end(), 0);
    for (int64_t root : roots) {
      int64_t i = root;
      size_t steps = 0;
      while (nodes[static_cast<size_t>(i)].mode != kLeaf) {
        if (++steps > nodes.size()) return false;
        const Node& nd = nodes[static_cast<size_t>(i)];
        double v = x[nd.feature];
        bool c;
        switch (nd.mode) {
          case kLeq: c = v <= nd.value; break;
          case kLt: c = v < nd.value; break;
          case kGte: c = v >= nd.value; break;
          case kGt: c = v > nd.value; break;
          case kEq: c = v == nd.value; break;
          case kNeq: c = v != nd.value; break;
          default: {  // kMember
            c = false;
            for (int64_t k = nd.begin; k < nd.end; ++k) {
              if (members[static_cast<size_t>(k)] == v) {
                c = true;
                break;
              }
            }
          }
        }
        if (nd.missing_true && std::isnan(v)) c = true;
        i = c ? nd.true_child : nd.false_child;
      }
      const Node& leaf = nodes[static_cast<size_t>(i)];
      for (int64_t k = leaf.begin; k < leaf.end; ++k) {
        const LeafWeight& w = weights[static_cast<size_t>(k)];
        double& o = out[w.target];
        uint8_t& h = (*has)[static_cast<size_t>(w.target)];
        switch (agg) {
          case Aggregate::kSum:
          case Aggregate::kAverage: o += w.weight; break;
          case Aggregate::kMin: o = h ? std::min(o, w.weight) : w.weight; break;
          case Aggregate::kMax: o = h ? std::max(o, w.weight) : w.weight; break;
        }
        h = 1;
      }
    }
    if (agg == Aggregate::kAverage && !roots.empty()) {
      for (int64_t t = 0; t < n_targets; ++t) out[t] /= static_cast<double>(roots.size());
    }
    return true;
  }
};

Status parse_mode_string(const ep::KernelInfo& info, const std::string& s, Mode* m) {
  static const std::pair<const char*, Mode> kModes[] = {{"BRANCH_LEQ", kLeq}, {"BRANCH_LT", kLt}, {"BRANCH_GTE", kGte},
                                                        {"BRANCH_GT", kGt},   {"BRANCH_EQ", kEq}, {"BRANCH_NEQ", kNeq},
                                                        {"LEAF", kLeaf},      {"BRANCH_MEMBER", kMember}};
  for (const auto& [name, mode] : kModes) {
    if (s == name) {
      *m = mode;
      return Status::Ok();
    }
  }
  return info.error("unknown node mode '" + s + "'");
}

std::string len_msg(const char* what, size_t got, const char* ref, size_t want) {
  return std::string(what) + " has " + std::to_string(got) + " entries but " + ref + " has " + std::to_string(want);
}

// Parses the opset 1/3 encoding: nodes_* tuples keyed by (treeid, nodeid), leaf votes in
// `<prefix>_treeids/_nodeids/_ids/_weights` (prefix "target" or "class").
Status parse_legacy(const ep::KernelInfo& info, const std::string& prefix, int64_t n_targets, Forest* f) {
  std::vector<int64_t> treeids = info.attr_ints("nodes_treeids"), nodeids = info.attr_ints("nodes_nodeids");
  std::vector<int64_t> featureids = info.attr_ints("nodes_featureids");
  std::vector<int64_t> trueids = info.attr_ints("nodes_truenodeids"), falseids = info.attr_ints("nodes_falsenodeids");
  std::vector<int64_t> missing = info.attr_ints("nodes_missing_value_tracks_true");
  std::vector<std::string> modes = info.attr_strings("nodes_modes");
  NXRT_ASSIGN_OR_RETURN(std::vector<double> values, ml::floats_or_tensor(info, "nodes_values"));
  size_t n = nodeids.size();
  if (n == 0) return info.error("nodes_nodeids is empty: the ensemble has no nodes");
  struct L { const char* name; size_t size; bool optional; };
  for (const L& l : {L{"nodes_treeids", treeids.size(), false}, L{"nodes_featureids", featureids.size(), false},
                     L{"nodes_modes", modes.size(), false}, L{"nodes_truenodeids", trueids.size(), false},
                     L{"nodes_falsenodeids", falseids.size(), false}, L{"nodes_values", values.size(), true},
                     L{"nodes_missing_value_tracks_true", missing.size(), true}}) {
    if (l.size != n && !(l.optional && l.size == 0)) return info.error(len_msg(l.name, l.size, "nodes_nodeids", n));
  }
  std::map<std::pair<int64_t, int64_t>, int64_t> index;
  f->nodes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!index.emplace(std::make_pair(treeids[i], nodeids[i]), static_cast<int64_t>(i)).second) {
      return info.error("node (tree " + std::to_string(treeids[i]) + ", id " + std::to_string(nodeids[i]) +
                        ") appears twice");
    }
  }
  std::set<std::pair<int64_t, int64_t>> children;
  for (size_t i = 0; i < n; ++i) {
    Node& nd = f->nodes[i];
    NXRT_RETURN_IF_ERROR(parse_mode_string(info, modes[i], &nd.mode));
    if (nd.mode == kMember) return info.error("BRANCH_MEMBER is only valid in TreeEnsemble (opset 5)");
    nd.missing_true = !missing.empty() && missing[i] != 0;
    nd.value = values.empty() ? 0.0 : values[i];
    if (nd.mode == kLeaf) continue;
    nd.feature = featureids[i];
    if (nd.feature < 0) return info.error("node " + std::to_string(i) + " has negative feature id " + std::to_string(nd.feature));
    f->max_feature = std::max(f->max_feature, nd.feature);
    for (int side = 0; side < 2; ++side) {
      int64_t id = side == 0 ? trueids[i] : falseids[i];
      auto it = index.find({treeids[i], id});
      if (it == index.end()) {
        return info.error(std::string(side == 0 ? "true" : "false") + " child id " + std::to_string(id) + " of node (tree " +
                          std::to_string(treeids[i]) + ", id " + std::to_string(nodeids[i]) + ") does not exist in that tree");
      }
      (side == 0 ? nd.true_child : nd.false_child) = it->second;
      children.insert({treeids[i], id});
    }
  }
  // Roots: per tree (in order of first appearance), the first node that is no node's child.
  std::set<int64_t> seen_tree;
  for (size_t i = 0; i < n; ++i) {
    if (seen_tree.count(treeids[i])) continue;
    int64_t root = -1;
    for (size_t j = i; j < n; ++j) {
      if (treeids[j] == treeids[i] && !children.count({treeids[j], nodeids[j]})) {
        root = static_cast<int64_t>(j);
        break;
      }
    }
    if (root < 0) return info.error("tree " + std::to_string(treeids[i]) + " has no root (every node is a child)");
    seen_tree.insert(treeids[i]);
    f->roots.push_back(root);
  }
  // Leaf votes.
  std::vector<int64_t> wt = info.attr_ints(prefix + "_treeids"), wn = info.attr_ints(prefix + "_nodeids");
  std::vector<int64_t> wid = info.attr_ints(prefix + "_ids");
  NXRT_ASSIGN_OR_RETURN(std::vector<double> ww, ml::floats_or_tensor(info, prefix + "_weights"));
  size_t nw = wid.size();
  std::string ids_name = prefix + "_ids";
  for (const L& l : {L{"_treeids", wt.size(), false}, L{"_nodeids", wn.size(), false}, L{"_weights", ww.size(), false}}) {
    if (l.size != nw) return info.error(len_msg((prefix + l.name).c_str(), l.size, ids_name.c_str(), nw));
  }
  std::vector<std::vector<LeafWeight>> per_node(n);
  for (size_t k = 0; k < nw; ++k) {
    auto it = index.find({wt[k], wn[k]});
    if (it == index.end()) {
      return info.error(prefix + " weight " + std::to_string(k) + " refers to node (tree " + std::to_string(wt[k]) + ", id " +
                        std::to_string(wn[k]) + ") which does not exist");
    }
    if (wid[k] < 0 || wid[k] >= n_targets) {
      return info.error(ids_name + "[" + std::to_string(k) + "] = " + std::to_string(wid[k]) + " is outside [0, " +
                        std::to_string(n_targets) + ")");
    }
    per_node[static_cast<size_t>(it->second)].push_back({wid[k], ww[k]});
  }
  for (size_t i = 0; i < n; ++i) {
    f->nodes[i].begin = static_cast<int64_t>(f->weights.size());
    f->weights.insert(f->weights.end(), per_node[i].begin(), per_node[i].end());
    f->nodes[i].end = static_cast<int64_t>(f->weights.size());
  }
  f->n_targets = n_targets;
  return Status::Ok();
}

Status parse_aggregate(const ep::KernelInfo& info, Aggregate* a) {
  const ir::Attribute* at = info.node().find_attribute("aggregate_function");
  *a = Aggregate::kSum;
  if (!at) return Status::Ok();
  if (at->type == ir::Attribute::Type::kInt) {  // opset 5: 0 AVERAGE, 1 SUM, 2 MIN, 3 MAX
    static const Aggregate k[] = {Aggregate::kAverage, Aggregate::kSum, Aggregate::kMin, Aggregate::kMax};
    if (at->i < 0 || at->i > 3) return info.error("aggregate_function must be in [0, 3], got " + std::to_string(at->i));
    *a = k[at->i];
    return Status::Ok();
  }
  if (at->s == "SUM") *a = Aggregate::kSum;
  else if (at->s == "AVERAGE") *a = Aggregate::kAverage;
  else if (at->s == "MIN") *a = Aggregate::kMin;
  else if (at->s == "MAX") *a = Aggregate::kMax;
  else return info.error("aggregate_function must be AVERAGE, SUM, MIN or MAX, got '" + at->s + "'");
  return Status::Ok();
}

Status check_features(ep::KernelContext& ctx, const Forest& f, const ml::Rows& x) {
  if (f.max_feature >= x.c) {
    return ctx.error("the trees read feature " + std::to_string(f.max_feature) + " but X has " + std::to_string(x.c) +
                         " features (" + ctx.input(0).describe() + ")",
                     StatusCode::kInvalidArgument);
  }
  return Status::Ok();
}

Status cycle_error(ep::KernelContext& ctx) {
  return ctx.error("a tree contains a cycle (a node is reached twice on one path)", StatusCode::kInvalidModel);
}

// Scores every row of x, splitting rows over the thread pool; finish(r, scores) post-processes row r
// (its scores buffer has max(width, n_targets) entries and may be resized). Errors on a cycle.
template <typename F>
Status score_rows(ep::KernelContext& ctx, const Forest& f, const ml::Rows& x, F&& finish) {
  std::atomic<bool> cycle{false};
  int64_t work = static_cast<int64_t>(f.roots.size()) * 8 + 1;
  int64_t grain = std::max<int64_t>(1, 8192 / work);
  ctx.pool().parallel_for(x.n, grain, [&](int64_t begin, int64_t end) {
    std::vector<double> row(static_cast<size_t>(f.n_targets));
    std::vector<uint8_t> has(static_cast<size_t>(f.n_targets));
    for (int64_t r = begin; r < end; ++r) {
      row.resize(static_cast<size_t>(f.n_targets));
      if (!f.score(x.row(r), row.data(), &has)) {
        cycle = true;
        return;
      }
      finish(r, row);
    }
  });
  return cycle ? cycle_error(ctx) : Status::Ok();
}

// ---- TreeEnsembleRegressor (opset 1, 3).
class TreeEnsembleRegressorKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    std::vector<int64_t> ids = info.attr_ints("target_ids");
    int64_t n_targets = info.attr_int("n_targets", -1);
    if (n_targets < 0) n_targets = ids.empty() ? 1 : *std::max_element(ids.begin(), ids.end()) + 1;
    if (n_targets < 1) return info.error("n_targets must be >= 1, got " + std::to_string(n_targets));
    NXRT_RETURN_IF_ERROR(parse_aggregate(info, &forest_.agg));
    NXRT_RETURN_IF_ERROR(parse_legacy(info, "target", n_targets, &forest_));
    NXRT_ASSIGN_OR_RETURN(base_, ml::floats_or_tensor(info, "base_values"));
    if (!base_.empty() && static_cast<int64_t>(base_.size()) != n_targets) {
      return info.error(len_msg("base_values", base_.size(), "n_targets", static_cast<size_t>(n_targets)));
    }
    return ml::read_post_transform(info, &post_);
  }

  Status compute(ep::KernelContext& ctx) const override {
    NXRT_ASSIGN_OR_RETURN(ml::Rows x, ml::read_rows(ctx, 0));
    NXRT_RETURN_IF_ERROR(check_features(ctx, forest_, x));
    int64_t t = forest_.n_targets;
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, {x.n, t}));
    float* py = y->data<float>();
    return score_rows(ctx, forest_, x, [&](int64_t r, std::vector<double>& row) {
      for (int64_t k = 0; k < t; ++k) row[static_cast<size_t>(k)] += base_.empty() ? 0.0 : base_[static_cast<size_t>(k)];
      ml::apply_post_transform(post_, row.data(), t);
      for (int64_t k = 0; k < t; ++k) py[r * t + k] = static_cast<float>(row[static_cast<size_t>(k)]);
    });
  }

 private:
  Forest forest_;
  std::vector<double> base_;
  PostTransform post_ = PostTransform::kNone;
};

// ---- TreeEnsembleClassifier (opset 1, 3). Scores are summed per class (plus base_values). With two
// class labels and votes for only one class id (a "binary" ensemble, e.g. gradient boosting), that
// class's score s becomes the two columns [1 - s, s] (post_transform NONE or PROBIT, then applied) or
// post_transform([-s, s]) otherwise, as the ONNX reference implementation does; the label is the
// larger column (ties: the first).
class TreeEnsembleClassifierKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(ml::read_labels(info, "classlabels_int64s", "classlabels_strings", &labels_));
    int64_t e = static_cast<int64_t>(labels_.size());
    if (e == 0) return info.error("classlabels_int64s or classlabels_strings must be set and non-empty");
    NXRT_RETURN_IF_ERROR(parse_legacy(info, "class", e, &forest_));
    NXRT_ASSIGN_OR_RETURN(base_, ml::floats_or_tensor(info, "base_values"));
    if (!base_.empty() && static_cast<int64_t>(base_.size()) != e) {
      return info.error(len_msg("base_values", base_.size(), "the class labels", static_cast<size_t>(e)));
    }
    NXRT_RETURN_IF_ERROR(ml::read_post_transform(info, &post_));
    std::set<int64_t> classes;
    for (const LeafWeight& w : forest_.weights) classes.insert(w.target);
    if (e == 2 && classes.size() == 1) binary_class_ = *classes.begin();
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    NXRT_ASSIGN_OR_RETURN(ml::Rows x, ml::read_rows(ctx, 0));
    NXRT_RETURN_IF_ERROR(check_features(ctx, forest_, x));
    int64_t e = static_cast<int64_t>(labels_.size());
    std::vector<int64_t> label_idx(static_cast<size_t>(x.n));
    Tensor* z = nullptr;
    if (ctx.output_requested(1)) {
      NXRT_ASSIGN_OR_RETURN(z, ctx.allocate_output(1, DataType::kFloat, {x.n, e}));
    }
    NXRT_RETURN_IF_ERROR(score_rows(ctx, forest_, x, [&](int64_t r, std::vector<double>& row) {
      for (int64_t k = 0; k < e && !base_.empty(); ++k) row[static_cast<size_t>(k)] += base_[static_cast<size_t>(k)];
      if (binary_class_ >= 0) {
        double s = row[static_cast<size_t>(binary_class_)];
        bool plain = post_ == PostTransform::kNone || post_ == PostTransform::kProbit;
        row = {plain ? 1 - s : -s, s};
        ml::apply_post_transform(post_, row.data(), 2);
        label_idx[static_cast<size_t>(r)] = row[1] > row[0] ? 1 : 0;
      } else {
        label_idx[static_cast<size_t>(r)] = std::max_element(row.begin(), row.end()) - row.begin();
        ml::apply_post_transform(post_, row.data(), e);
      }
      if (z) {
        for (int64_t k = 0; k < e; ++k) z->data<float>()[r * e + k] = static_cast<float>(row[static_cast<size_t>(k)]);
      }
    }));
    return ml::write_labels(ctx, 0, labels_, label_idx);
  }

 private:
  Forest forest_;
  ml::Labels labels_;
  std::vector<double> base_;
  PostTransform post_ = PostTransform::kNone;
  int64_t binary_class_ = -1;
};

// ---- TreeEnsemble (opset 5).
class TreeEnsembleKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    Forest& f = forest_;
    f.n_targets = info.attr_int("n_targets", -1);
    NXRT_RETURN_IF_ERROR(parse_aggregate(info, &f.agg));
    NXRT_RETURN_IF_ERROR(ml::read_post_transform(info, &post_));
    std::vector<int64_t> featureids = info.attr_ints("nodes_featureids");
    std::vector<int64_t> trueids = info.attr_ints("nodes_truenodeids"), falseids = info.attr_ints("nodes_falsenodeids");
    std::vector<int64_t> trueleafs = info.attr_ints("nodes_trueleafs"), falseleafs = info.attr_ints("nodes_falseleafs");
    std::vector<int64_t> missing = info.attr_ints("nodes_missing_value_tracks_true");
    std::vector<int64_t> roots = info.attr_ints("tree_roots");
    std::vector<int64_t> leaf_targets = info.attr_ints("leaf_targetids");
    const Tensor* modes_t = info.attr_tensor("nodes_modes");
    const Tensor* splits_t = info.attr_tensor("nodes_splits");
    const Tensor* weights_t = info.attr_tensor("leaf_weights");
    if (!modes_t || !splits_t || !weights_t) {
      return info.error("nodes_modes, nodes_splits and leaf_weights must be tensor attributes");
    }
    auto modes = read_int_values(*modes_t);
    auto splits = read_double_values(*splits_t);
    auto lw = read_double_values(*weights_t);
    if (!modes.ok() || !splits.ok() || !lw.ok()) return info.error("nodes_modes must be integer, nodes_splits and leaf_weights numeric");
    std::vector<double> members;
    if (const Tensor* m = info.attr_tensor("membership_values")) {
      auto mv = read_double_values(*m);
      if (!mv.ok()) return info.error("membership_values must be numeric");
      members = std::move(mv).value();
    }
    size_t n = featureids.size();
    struct L { const char* name; size_t size; bool optional; };
    for (const L& l : {L{"nodes_truenodeids", trueids.size(), false}, L{"nodes_falsenodeids", falseids.size(), false},
                       L{"nodes_trueleafs", trueleafs.size(), false}, L{"nodes_falseleafs", falseleafs.size(), false},
                       L{"nodes_modes", modes.value().size(), false}, L{"nodes_splits", splits.value().size(), false},
                       L{"nodes_missing_value_tracks_true", missing.size(), true}}) {
      if (l.size != n && !(l.optional && l.size == 0)) return info.error(len_msg(l.name, l.size, "nodes_featureids", n));
    }
    size_t nl = leaf_targets.size();
    if (lw.value().size() != nl) return info.error(len_msg("leaf_weights", lw.value().size(), "leaf_targetids", nl));
    if (n == 0 || nl == 0) return info.error("the ensemble needs at least one node and one leaf");
    if (f.n_targets < 0) f.n_targets = *std::max_element(leaf_targets.begin(), leaf_targets.end()) + 1;
    if (f.n_targets < 1) return info.error("n_targets must be >= 1");
    // Interior nodes 0..n-1, then leaves n..n+nl-1 (one weight each).
    f.nodes.resize(n + nl);
    size_t member_pos = 0;
    for (size_t i = 0; i < n; ++i) {
      Node& nd = f.nodes[i];
      int64_t m = modes.value()[i];
      if (m < 0 || m > 6) return info.error("nodes_modes[" + std::to_string(i) + "] = " + std::to_string(m) + " is not in [0, 6]");
      nd.mode = static_cast<Mode>(m);
      nd.feature = featureids[i];
      if (nd.feature < 0) return info.error("nodes_featureids[" + std::to_string(i) + "] is negative");
      f.max_feature = std::max(f.max_feature, nd.feature);
      nd.value = splits.value()[i];
      nd.missing_true = !missing.empty() && missing[i] != 0;
      for (int side = 0; side < 2; ++side) {
        int64_t id = side == 0 ? trueids[i] : falseids[i];
        bool leaf = (side == 0 ? trueleafs[i] : falseleafs[i]) != 0;
        int64_t limit = static_cast<int64_t>(leaf ? nl : n);
        if (id < 0 || id >= limit) {
          return info.error(std::string(side == 0 ? "nodes_truenodeids" : "nodes_falsenodeids") + "[" + std::to_string(i) +
                            "] = " + std::to_string(id) + " is outside the " + std::to_string(limit) +
                            (leaf ? " leaves" : " nodes"));
        }
        (side == 0 ? nd.true_child : nd.false_child) = leaf ? static_cast<int64_t>(n) + id : id;
      }
      if (nd.mode == kMember) {
        nd.begin = static_cast<int64_t>(f.members.size());
        while (member_pos < members.size() && !std::isnan(members[member_pos])) f.members.push_back(members[member_pos++]);
        nd.end = static_cast<int64_t>(f.members.size());
        if (member_pos < members.size()) ++member_pos;  // the NaN delimiter
      }
    }
    for (size_t k = 0; k < nl; ++k) {
      if (leaf_targets[k] < 0 || leaf_targets[k] >= f.n_targets) {
        return info.error("leaf_targetids[" + std::to_string(k) + "] = " + std::to_string(leaf_targets[k]) +
                          " is outside [0, n_targets=" + std::to_string(f.n_targets) + ")");
      }
      Node& leaf = f.nodes[n + k];
      leaf.mode = kLeaf;
      leaf.begin = static_cast<int64_t>(f.weights.size());
      f.weights.push_back({leaf_targets[k], lw.value()[k]});
      leaf.end = leaf.begin + 1;
    }
    if (roots.empty()) return info.error("tree_roots is empty");
    for (int64_t r : roots) {
      if (r < 0 || r >= static_cast<int64_t>(n)) {
        return info.error("tree_roots entry " + std::to_string(r) + " is outside the " + std::to_string(n) + " nodes");
      }
    }
    f.roots = roots;
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    const Tensor* xt = ctx.has_input(0) ? &ctx.input(0) : nullptr;
    if (!xt || (xt->dtype() != DataType::kFloat && xt->dtype() != DataType::kDouble && xt->dtype() != DataType::kFloat16)) {
      return ctx.error("X must be float, double or float16, got " + (xt ? xt->describe() : std::string("nothing")),
                       StatusCode::kInvalidArgument);
    }
    NXRT_ASSIGN_OR_RETURN(ml::Rows x, ml::read_rows(ctx, 0));
    NXRT_RETURN_IF_ERROR(check_features(ctx, forest_, x));
    int64_t t = forest_.n_targets;
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, xt->dtype(), {x.n, t}));
    return dispatch_float(xt->dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* py = y->data<T>();
      return score_rows(ctx, forest_, x, [&](int64_t r, std::vector<double>& row) {
        ml::apply_post_transform(post_, row.data(), t);
        for (int64_t k = 0; k < t; ++k) py[r * t + k] = from_compute<T>(row[static_cast<size_t>(k)]);
      });
    }, [&] { return ctx.error("unsupported dtype", StatusCode::kNotImplemented); });
  }

 private:
  Forest forest_;
  PostTransform post_ = PostTransform::kNone;
};

}  // namespace

void register_ml_tree_ops(ep::KernelRegistry& r) {
  r.add_class<TreeEnsembleRegressorKernel>("ai.onnx.ml", "TreeEnsembleRegressor", 1);
  r.add_class<TreeEnsembleClassifierKernel>("ai.onnx.ml", "TreeEnsembleClassifier", 1);
  r.add_class<TreeEnsembleKernel>("ai.onnx.ml", "TreeEnsemble", 5);
}

}  // namespace nxrt::ops
