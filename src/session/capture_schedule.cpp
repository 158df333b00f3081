// The capture classifier; see capture_schedule.h.
#include "session/capture_schedule.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

namespace nxrt::session {

namespace {

using ir::SymDim;
using ir::SymbolTable;
using ir::ValueFacts;

// Where an attention op keeps its growing KV cache: inputs and outputs whose penultimate axis is the
// sequence. One table, so a new attention op is one line here (an unlisted one is still caught by the
// past*/present* graph I/O scan).
struct KvSlots {
  const char* domain;
  const char* op;
  std::vector<size_t> past_inputs;
  std::vector<size_t> present_outputs;
};

const std::vector<KvSlots>& kv_slot_table() {
  static const std::vector<KvSlots> table = {
      {"com.microsoft", "GroupQueryAttention", {3, 4}, {1, 2}},
      {"", "Attention", {4, 5}, {1, 2}},
      {"com.microsoft", "Attention", {4}, {1}},
      {"com.microsoft", "MultiHeadAttention", {6, 7}, {1, 2}},
  };
  return table;
}

bool is_op(const ir::Node& n, const char* domain, const char* op) {
  return n.op_type == op && ir::canonical_domain(n.domain) == ir::canonical_domain(domain);
}

// TensorScatter's cache axis (attribute `axis`, default -2) for a value of `rank`, or -1.
int64_t scatter_axis(const ir::Node& n, int64_t rank) {
  int64_t axis = -2;
  if (const ir::Attribute* a = n.find_attribute("axis")) axis = a->i;
  if (axis < 0) axis += rank;
  return axis >= 0 && axis < rank ? axis : -1;
}

bool is_control_flow(const ir::Node& n) {
  if (n.domain.empty() && (n.op_type == "If" || n.op_type == "Loop" || n.op_type == "Scan")) return true;
  for (const auto& a : n.attributes) {
    if (a.g || !a.graphs.empty()) return true;
  }
  return false;
}

const char* control_flow_reason(const ir::Node& n) {
  if (n.op_type == "If") return "host control flow: If picks its branch on the host from the condition's value";
  if (n.op_type == "Loop") return "host control flow: Loop decides its trip count on the host";
  if (n.op_type == "Scan") return "host control flow: Scan runs its body per slice on the host";
  return "host control flow: the node runs a subgraph";
}

const char* kind_name(ir::TypeInfo::Kind k) {
  switch (k) {
    case ir::TypeInfo::Kind::kSequence: return "sequence";
    case ir::TypeInfo::Kind::kOptional: return "optional";
    case ir::TypeInfo::Kind::kMap: return "map";
    case ir::TypeInfo::Kind::kSparseTensor: return "sparse tensor";
    default: return "of unknown kind";
  }
}

// A KV value whose sequence axis a seed or a pin refers to.
struct KvValue {
  std::string name;
  int64_t axis = -1;
  std::string why;  // "KV sequence axis of GroupQueryAttention 'n' input 3"
  bool structural = true;  // from an attention op (false: from the graph I/O name scan)
};

class Classifier {
 public:
  Classifier(const GraphPlan& plan, ClassifierMode mode) : plan_(plan), g_(plan.graph()), mode_(mode) {
    if (g_.shape_facts) {
      facts_ = g_.shape_facts.get();
      S_ = facts_->symbols.get();
    }
  }

  CaptureSchedule run(const std::vector<SharedKvPair>& shared_kv) {
    CaptureSchedule out;
    out.mode = mode_;
    out.steps.resize(plan_.steps().size());
    if (!S_) {
      for (auto& e : out.steps) e.reason = "no load-time shape facts for the graph";
      return out;
    }
    collect_kv_values();
    pin(shared_kv, out);
    seed();
    close();
    for (const auto& [rep, why] : growing_) out.growing_symbols.push_back(S_->name(rep) + ": " + why);
    for (size_t k = 0; k < plan_.steps().size(); ++k) {
      out.steps[k].reason = classify(plan_.steps()[k]);
      out.steps[k].captured = out.steps[k].reason.empty();
    }
    return out;
  }

 private:
  const ValueFacts* facts(const std::string& name) const { return facts_->find(name); }
  int32_t rep(int32_t s) const { return S_->find(s); }
  int32_t axis_symbol(const std::string& name, int64_t axis) const {
    const ValueFacts* f = facts(name);
    if (!f || !f->has_shape || axis < 0 || axis >= static_cast<int64_t>(f->dims.size())) return -1;
    const SymDim d = f->dims[static_cast<size_t>(axis)];
    return d.is_const() ? -1 : rep(d.sym);
  }
  int64_t rank_of(const std::string& name) const {
    const ValueFacts* f = facts(name);
    return f && f->has_shape ? static_cast<int64_t>(f->dims.size()) : -1;
  }

  // Every KV value the graph has: attention-op slots, TensorScatter caches, past*/present* graph I/O.
  void collect_kv_values() {
    for (const auto& node : g_.nodes) {
      const std::string label = "'" + node.name + "'";
      for (const KvSlots& t : kv_slot_table()) {
        if (!is_op(node, t.domain, t.op)) continue;
        for (size_t i : t.past_inputs) {
          if (i < node.inputs.size() && !node.inputs[i].empty()) {
            add_kv(node.inputs[i], rank_of(node.inputs[i]) - 2,
                   std::string("KV sequence axis of ") + t.op + " " + label + " input " + std::to_string(i), true);
          }
        }
        for (size_t i : t.present_outputs) {
          if (i < node.outputs.size() && !node.outputs[i].empty()) {
            add_kv(node.outputs[i], rank_of(node.outputs[i]) - 2,
                   std::string("KV sequence axis of ") + t.op + " " + label + " output " + std::to_string(i), true);
          }
        }
      }
      if (is_op(node, "", "TensorScatter") && !node.inputs.empty() && !node.outputs.empty()) {
        const int64_t r = rank_of(node.inputs[0]);
        add_kv(node.inputs[0], r < 0 ? -1 : scatter_axis(node, r), "cache axis of TensorScatter " + label + " input 0",
               true);
        add_kv(node.outputs[0], r < 0 ? -1 : scatter_axis(node, r),
               "cache axis of TensorScatter " + label + " output 0", true);
      }
    }
    auto io = [&](const std::string& name, const char* prefix, const char* what) {
      if (name.rfind(prefix, 0) == 0 && rank_of(name) == 4) add_kv(name, 2, std::string("sequence axis of ") + what + " '" + name + "'", false);
    };
    for (const auto& in : g_.inputs) io(in.name, "past", "rank-4 graph input");
    for (const auto& out : g_.outputs) io(out.name, "present", "rank-4 graph output");
    // The attention mask of the genai contract covers past + new tokens: its last axis grows.
    for (const auto& in : g_.inputs) {
      const int64_t r = rank_of(in.name);
      if (in.name.find("attention_mask") != std::string::npos && r >= 2) {
        add_kv(in.name, r - 1, "length of the attention mask '" + in.name + "' (past + new tokens)", false);
      }
    }
  }
  void add_kv(const std::string& name, int64_t axis, std::string why, bool structural) {
    if (axis < 0) return;
    kv_.push_back({name, axis, std::move(why), structural});
  }

  // Pins the KV values of shared fixed-capacity pairs, and the symbols on their sequence axes that
  // nothing else in the graph I/O carries (see capture_schedule.h).
  void pin(const std::vector<SharedKvPair>& shared_kv, CaptureSchedule& out) {
    const std::vector<SharedKvPair> pinnable = pinnable_kv_pairs(plan_);
    for (const auto& want : shared_kv) {
      for (const auto& p : pinnable) {
        if (p.past == want.past && p.present == want.present) {
          pinned_values_.insert(p.past);
          pinned_values_.insert(p.present);
        }
      }
    }
    out.pinned_values = pinned_values_;
    std::map<int32_t, std::string> candidates;  // rep -> the pinned values carrying it
    for (const KvValue& v : kv_) {
      if (!pinned_values_.count(v.name)) continue;
      const int32_t r = axis_symbol(v.name, v.axis);
      if (r < 0) continue;
      std::string& who = candidates[r];
      if (who.find(v.name) == std::string::npos) who += (who.empty() ? "" : ", ") + v.name;
    }
    for (const auto& [cand, who] : candidates) {
      const int32_t r = cand;  // a plain variable: lambdas below capture it
      bool ok = true;
      // Every KV seed of the class comes from a pinned value ...
      for (const KvValue& v : kv_) {
        if (axis_symbol(v.name, v.axis) == r && !pinned_values_.count(v.name)) ok = false;
      }
      // ... and no other graph input or output carries it (on any axis).
      auto carried_elsewhere = [&](const std::string& name) {
        if (pinned_values_.count(name)) return false;
        const ValueFacts* f = facts(name);
        if (!f || !f->has_shape) return false;
        for (const auto& d : f->dims) {
          if (!d.is_const() && rep(d.sym) == r) return true;
        }
        return false;
      };
      for (const auto& in : g_.inputs) ok = ok && !carried_elsewhere(in.name);
      for (const auto& o : g_.outputs) ok = ok && !carried_elsewhere(o.name);
      if (ok) {
        pinned_reps_.insert(r);
        out.pinned_symbols.push_back(S_->name(r) + " (fixed-capacity KV: " + who + ")");
      }
    }
  }

  // Whether the class of `r` traces to something a run fixes: a dim of a graph input (the caller's
  // binding decides it) or a derived symbol (its sources are checked by the closure). A symbol minted
  // for an unknowable extent, or named only on a graph output, has none.
  bool has_provenance(int32_t r) {
    if (provenance_.empty()) {
      provenance_.assign(S_->size(), 0);
      for (size_t s = 0; s < S_->size(); ++s) {
        if (S_->derived(static_cast<int32_t>(s))) provenance_[static_cast<size_t>(rep(static_cast<int32_t>(s)))] = 1;
      }
      for (const auto& in : g_.inputs) {
        const ValueFacts* f = facts(in.name);
        if (!f) continue;
        for (const auto& d : f->dims) {
          if (!d.is_const()) provenance_[static_cast<size_t>(rep(d.sym))] = 1;
        }
      }
    }
    return provenance_[static_cast<size_t>(r)] != 0;
  }

  void add_seed(int32_t r, const std::string& why) {
    if (r < 0 || pinned_reps_.count(r)) return;
    growing_.emplace(r, why);
  }

  void seed() {
    for (const KvValue& v : kv_) {
      if (pinned_values_.count(v.name)) continue;
      add_seed(axis_symbol(v.name, v.axis), v.why);
    }
    for (size_t s = 0; s < S_->size(); ++s) {
      const auto id = static_cast<int32_t>(s);
      if (S_->is_opaque(id)) add_seed(rep(id), "opaque: shape inference could not compute this extent");
      if (mode_ == ClassifierMode::kFailSafe && !has_provenance(rep(id))) {
        add_seed(rep(id), "no provenance: minted by shape inference or named only on a graph output (fail-safe)");
      }
    }
  }

  // Closes the set over derivations (source -> derived). Unified symbols share a representative, so
  // working on representatives closes over unifications both ways.
  void close() {
    std::unordered_map<int32_t, std::vector<int32_t>> derived_from;
    for (const auto& [d, def] : S_->all_derived()) {
      for (const SymDim& o : def.operands) {
        if (!o.is_const()) derived_from[rep(o.sym)].push_back(rep(d));
      }
    }
    std::vector<int32_t> work;
    for (const auto& [r, why] : growing_) work.push_back(r);
    while (!work.empty()) {
      const int32_t r = work.back();
      work.pop_back();
      auto it = derived_from.find(r);
      if (it == derived_from.end()) continue;
      for (int32_t d : it->second) {
        if (pinned_reps_.count(d) || growing_.count(d)) continue;
        growing_.emplace(d, "derived from " + S_->name(r) + " (" + S_->derived_string(d) + ")");
        work.push_back(d);
      }
    }
  }

  bool touches(const std::vector<SymDim>& dims, int32_t* which) const {
    for (const auto& d : dims) {
      if (!d.is_const() && growing_.count(rep(d.sym))) {
        *which = rep(d.sym);
        return true;
      }
    }
    return false;
  }

  // Why the step stays eager, or "" when it can be captured.
  std::string classify(const PlanStep& step) {
    const ir::Node& node = *step.node;
    if (is_control_flow(node)) return control_flow_reason(node);
    if (step.capture_decline) return std::string("kernel declines capture: ") + step.capture_decline;
    const ep::CaptureSupport cs = step.kernel->capture_support();
    if (!cs.supported) return std::string("kernel declines capture: ") + cs.reason;
    std::set<int32_t> input_reps;
    for (const auto& name : node.inputs) {
      if (name.empty()) continue;
      if (std::string why = check_edge(name); !why.empty()) return why;
      if (const ValueFacts* f = facts(name)) {
        for (const auto& d : f->dims) if (!d.is_const()) input_reps.insert(rep(d.sym));
        for (const auto& d : f->values) if (!d.is_const()) input_reps.insert(rep(d.sym));
      }
    }
    for (const auto& name : node.outputs) {
      if (name.empty() || pinned_values_.count(name)) continue;
      const ValueFacts* f = facts(name);
      if (!f) continue;
      for (const auto& d : f->dims) {
        if (d.is_const()) continue;
        const int32_t r = rep(d.sym);
        if (!has_provenance(r) && !input_reps.count(r)) {
          return "output '" + name + "' " + f->describe(*S_) + " has an extent that depends on input data (" +
                 S_->name(r) + ")";
        }
      }
    }
    for (const auto& name : node.outputs) {
      if (name.empty()) continue;
      if (std::string why = check_edge(name); !why.empty()) return why;
    }
    return "";
  }

  std::string check_edge(const std::string& name) {
    if (pinned_values_.count(name)) return "";
    const ValueFacts* f = facts(name);
    const bool fail_safe = mode_ == ClassifierMode::kFailSafe;
    if (!f) return fail_safe ? "no load-time shape for '" + name + "' (fail-safe)" : "";
    if (f->kind != ir::TypeInfo::Kind::kTensor) {
      if (f->kind == ir::TypeInfo::Kind::kUnknown && !fail_safe) return "";
      return "'" + name + "' is a " + kind_name(f->kind) + " value";
    }
    if (!f->has_shape) return fail_safe ? "rank of '" + name + "' unknown at load time (fail-safe)" : "";
    int32_t r = -1;
    if (touches(f->dims, &r)) {
      return "shape of '" + name + "' " + f->describe(*S_) + " touches growing symbol " + S_->name(r) + " (" +
             growing_.at(r) + ")";
    }
    return "";
  }

  const GraphPlan& plan_;
  const ir::Graph& g_;
  ClassifierMode mode_;
  const ir::ShapeFacts* facts_ = nullptr;
  const SymbolTable* S_ = nullptr;
  std::vector<KvValue> kv_;
  std::set<std::string> pinned_values_;
  std::set<int32_t> pinned_reps_;
  std::map<int32_t, std::string> growing_;  // representative -> why it is in the set
  std::vector<char> provenance_;            // per representative
};

std::string segment_ops(const GraphPlan& plan, size_t a, size_t b) {
  std::map<std::string, int> count;
  std::vector<std::string> order;
  for (size_t k = a; k <= b; ++k) {
    const ir::Node& n = *plan.steps()[k].node;
    const std::string op = n.domain.empty() ? n.op_type : n.domain + "::" + n.op_type;
    if (count[op]++ == 0) order.push_back(op);
  }
  std::string s;
  for (const auto& op : order) s += (s.empty() ? "" : ", ") + op + (count[op] > 1 ? " x" + std::to_string(count[op]) : "");
  return s;
}

}  // namespace

ClassifierMode classifier_mode_from_env() {
  const char* e = std::getenv("NXRT_CAPTURE_CLASSIFIER");
  if (!e) return ClassifierMode::kFailSafe;
  std::string v(e);
  for (char& c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return v == "denylist" || v == "deny" || v == "0" ? ClassifierMode::kDenylist : ClassifierMode::kFailSafe;
}

const char* classifier_mode_name(ClassifierMode m) { return m == ClassifierMode::kDenylist ? "denylist" : "fail-safe"; }

size_t CaptureSchedule::captured_steps() const {
  return static_cast<size_t>(std::count_if(steps.begin(), steps.end(), [](const ScheduleEntry& e) { return e.captured; }));
}

size_t CaptureSchedule::segments() const {
  size_t n = 0;
  for (size_t k = 0; k < steps.size(); ++k) n += steps[k].captured && (k == 0 || !steps[k - 1].captured);
  return n;
}

std::string CaptureSchedule::describe(const GraphPlan& plan) const {
  std::string s = "classifier: " + std::string(classifier_mode_name(mode)) + "\n";
  s += std::to_string(steps.size()) + " steps: " + std::to_string(captured_steps()) + " captured in " +
       std::to_string(segments()) + " segments, " + std::to_string(steps.size() - captured_steps()) + " eager seams\n";
  if (!pinned_values.empty()) {
    s += "pinned KV values:";
    for (const auto& v : pinned_values) s += " " + v;
    s += "\n";
  }
  for (const auto& p : pinned_symbols) s += "pinned symbol: " + p + "\n";
  for (const auto& g : growing_symbols) s += "growing symbol: " + g + "\n";
  int seg = 0;
  for (size_t k = 0; k < steps.size();) {
    if (steps[k].captured) {
      size_t e = k;
      while (e + 1 < steps.size() && steps[e + 1].captured) ++e;
      s += "segment " + std::to_string(++seg) + ": steps " + std::to_string(k) + "-" + std::to_string(e) + " (" +
           std::to_string(e - k + 1) + " nodes: " + segment_ops(plan, k, e) + ")\n";
      k = e + 1;
    } else {
      const ir::Node& n = *plan.steps()[k].node;
      s += "seam step " + std::to_string(k) + ": " + (n.domain.empty() ? "" : n.domain + "::") + n.op_type + " '" +
           n.name + "': " + steps[k].reason + "\n";
      ++k;
    }
  }
  return s;
}

CaptureSchedule build_capture_schedule(const GraphPlan& plan, ClassifierMode mode,
                                       const std::vector<SharedKvPair>& shared_kv) {
  return Classifier(plan, mode).run(shared_kv);
}

std::vector<SharedKvPair> pinnable_kv_pairs(const GraphPlan& plan) {
  const ir::Graph& g = plan.graph();
  std::unordered_set<std::string> inputs, outputs;
  for (const auto& in : g.inputs) inputs.insert(in.name);
  for (const auto& o : g.outputs) outputs.insert(o.name);
  std::vector<SharedKvPair> pairs;
  auto add = [&](const ir::Node& n, size_t in, size_t out) {
    if (in < n.inputs.size() && out < n.outputs.size() && inputs.count(n.inputs[in]) && outputs.count(n.outputs[out])) {
      pairs.push_back({n.inputs[in], n.outputs[out]});
    }
  };
  for (const auto& n : g.nodes) {
    // The valid length reaches the kernel as data: GroupQueryAttention's seqlens_k, TensorScatter's
    // write_indices; the cache tensor keeps its capacity.
    if (is_op(n, "com.microsoft", "GroupQueryAttention") && n.inputs.size() > 5 && !n.inputs[5].empty()) {
      add(n, 3, 1);
      add(n, 4, 2);
    }
    if (is_op(n, "", "TensorScatter") && n.inputs.size() > 2 && !n.inputs[2].empty()) add(n, 0, 0);
  }
  return pairs;
}

}  // namespace nxrt::session
