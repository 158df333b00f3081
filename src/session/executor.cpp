#include "session/executor.h"

#include "ir/allocation.h"
#include "ir/symbols.h"
#include "session/exec_context.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <shared_mutex>
#include <unordered_set>

namespace nxrt::session {

ep::SlotMemory ThreadSlotArena::get(BufferPool& pool, size_t bytes, int slots) {
  // Strides in whole 4 KB pages, grown by at least half: a model whose kernels ask for a little more
  // one after another moves its slots a few times, not once per kernel.
  const size_t stride = (std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096;
  if (!block_ || stride > stride_ || slots > slots_) {
    if (stride > stride_) stride_ = std::max(stride, stride_ + stride_ / 2 / 4096 * 4096);
    slots_ = std::max(slots, slots_);
    block_.reset();
    block_ = pool.acquire(stride_ * static_cast<size_t>(slots_));
  }
  return {static_cast<char*>(block_->data()), stride_, slots_};
}

namespace {

// Runs a subgraph with its own plan; outer-scope names resolve through the calling node's frame.
class PlannedSubgraph final : public ep::SubgraphRunner {
 public:
  explicit PlannedSubgraph(std::unique_ptr<GraphPlan> plan) : plan_(std::move(plan)) {}
  const ir::Graph& graph() const override { return plan_->graph(); }
  const GraphPlan& plan() const { return *plan_; }
  size_t num_inputs() const override { return plan_->input_slots().size(); }
  size_t num_outputs() const override { return plan_->output_slots().size(); }

  Result<std::vector<Value>> run(ep::KernelContext& ctx, std::vector<Value> inputs) override {
    std::vector<Value> outs;
    NXRT_RETURN_IF_ERROR(run_into(ctx, inputs, outs));
    return outs;
  }

  Status run_into(ep::KernelContext& ctx, std::vector<Value>& inputs, std::vector<Value>& outputs) override {
    auto* exec = dynamic_cast<ExecContext*>(&ctx);
    if (!exec) return runtime_error("subgraph run outside the executor");
    if (inputs.size() != plan_->input_slots().size()) {
      return ctx.error("subgraph '" + plan_->graph().name + "' takes " + std::to_string(plan_->input_slots().size()) +
                       " inputs, given " + std::to_string(inputs.size()));
    }
    // Reuse one frame across calls (a Loop body runs many times); nested use, or a concurrent run of
    // the session in the same subgraph, gets a fresh one. The spare frame is handed over under a mutex
    // (it was an atomic busy flag beside a member frame, which ThreadSanitizer reported as a race
    // between two runs' uses of that frame under ConcurrentRuns.MemoryLimitCoversEveryRunContext, a
    // few runs in a hundred); a frame owned by this call also goes away on any exit.
    std::unique_ptr<Frame> owned;
    {
      std::lock_guard<std::mutex> lk(spare_mu_);
      owned = std::move(spare_);
    }
    if (!owned) owned = std::make_unique<Frame>();
    Frame& frame = *owned;
    frame.plan = plan_.get();
    frame.parent = &exec->frame();
    frame.hooks = exec->frame().hooks;
    frame.res = exec->frame().res;
    frame.slots.resize(plan_->num_slots());
    for (size_t i = 0; i < inputs.size(); ++i) {
      frame.slots[static_cast<size_t>(plan_->input_slots()[i])] = std::move(inputs[i]);
    }
    Status s = plan_->prepare_frame(frame);
    if (s.ok()) s = plan_->execute(frame, ctx.pool());
    if (s.ok()) {
      outputs.resize(plan_->output_slots().size());
      for (size_t k = 0; k < outputs.size(); ++k) {
        outputs[k] = frame.slots[static_cast<size_t>(plan_->output_slots()[k])];
      }
    }
    GraphPlan::clear_frame(frame);
    for (auto& v : inputs) v = Value();
    {
      std::lock_guard<std::mutex> lk(spare_mu_);
      if (!spare_) spare_ = std::move(owned);
    }
    if (!s.ok()) return s.with_context("in subgraph '" + plan_->graph().name + "': ");
    return Status::Ok();
  }

 private:
  std::unique_ptr<GraphPlan> plan_;
  std::mutex spare_mu_;
  std::unique_ptr<Frame> spare_;  // the frame kept for the next call (null while a call has it)
};

bool same_shapes(const KernelVariantEntry& e, const Value* const* inputs, size_t n) {
  if (!e.valid || e.shapes.size() != n) return false;
  for (size_t i = 0; i < n; ++i) {
    const Value* v = inputs[i];
    if (!v || !v->is_tensor()) {
      if (e.dtypes[i] != DataType::kUndefined || !e.shapes[i].empty()) return false;
      continue;
    }
    if (e.dtypes[i] != v->tensor().dtype() || e.shapes[i] != v->tensor().shape()) return false;
  }
  return true;
}

// The entry a miss specializes into: a free one, a new one below the bound, else the least recently
// used, preferring variants no capture record points at. An evicted variant is destroyed here (its
// state, and with it whatever it held, is freed); records that pointed at it are dropped first.
// Called with the cache's mutex held exclusively.
size_t entry_for_miss(const PlanStep& step, RunResources& res) {
  NodeKernelCache& c = step.cache;
  for (size_t k = 0; k < c.variants.size(); ++k) {
    if (!c.variants[k].valid) return k;
  }
  if (c.variants.size() < res.cache->variants_per_node) {
    c.variants.emplace_back();
    return c.variants.size() - 1;
  }
  size_t victim = c.variants.size();
  for (int pass = 0; pass < 2 && victim == c.variants.size(); ++pass) {
    for (size_t k = 0; k < c.variants.size(); ++k) {
      if (pass == 0 && c.variants[k].recorded_by != 0) continue;
      if (victim == c.variants.size() ||
          c.variants[k].last_used.load(std::memory_order_relaxed) <
              c.variants[victim].last_used.load(std::memory_order_relaxed)) {
        victim = k;
      }
    }
  }
  KernelVariantEntry& e = c.variants[victim];
  if (e.recorded_by != 0 && res.cache->eviction_listener) {
    res.cache->eviction_listener->on_recorded_variant_evicted(e.recorded_by, *step.node);
  }
  e.recorded_by = 0;
  e.state.reset();
  e.valid = false;
  ++res.cache_stats.evictions;
  return victim;
}

// The kernel cache lookup for one step: the variant for the current input shapes, created on a miss.
// The caller holds the returned reference for the step, so another run's eviction cannot free it.
Result<std::shared_ptr<const ep::KernelVariant>> lookup_variant(const PlanStep& step, ExecContext& ctx,
                                                                RunResources& res) {
  NodeKernelCache& c = step.cache;
  const Value* const* in = ctx.input_array();
  const size_t n = ctx.num_inputs();
  const uint64_t now = res.cache->clock.fetch_add(1, std::memory_order_relaxed) + 1;
  // A hit by scanning the entries (under either lock): stamps it and makes it the prebound guess.
  auto scan_for_hit = [&]() -> const KernelVariantEntry* {
    for (size_t k = 0; k < c.variants.size(); ++k) {
      if (!same_shapes(c.variants[k], in, n)) continue;
      c.variants[k].last_used.store(now, std::memory_order_relaxed);
      c.prebound.store(static_cast<int>(k), std::memory_order_relaxed);
      ++res.cache_stats.hits;
      ctx.set_variant_entry(static_cast<int>(k));
      return &c.variants[k];
    }
    return nullptr;
  };
  {
    std::shared_lock<std::shared_mutex> lock(c.mu);
    const int pb = c.prebound.load(std::memory_order_relaxed);
    if (pb >= 0 && same_shapes(c.variants[static_cast<size_t>(pb)], in, n)) {
      KernelVariantEntry& e = c.variants[static_cast<size_t>(pb)];
      e.last_used.store(now, std::memory_order_relaxed);
      ++res.cache_stats.prebound_hits;
      ctx.set_variant_entry(pb);
      return e.state;
    }
    if (const KernelVariantEntry* hit = scan_for_hit()) return hit->state;
  }
  std::unique_lock<std::shared_mutex> lock(c.mu);
  // Another run may have added these shapes between the two locks.
  if (const KernelVariantEntry* hit = scan_for_hit()) return hit->state;
  ++res.cache_stats.misses;
  // A miss reuses an entry in place (its vectors keep their capacity), so even a stream of new shapes
  // (a growing attention mask) allocates nothing here beyond what specialize builds.
  const size_t slot = entry_for_miss(step, res);
  KernelVariantEntry& e = c.variants[slot];
  e.dtypes.assign(n, DataType::kUndefined);
  e.shapes.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (in[i] && in[i]->is_tensor()) {
      e.dtypes[i] = in[i]->tensor().dtype();
      e.shapes[i] = in[i]->tensor().shape();
    } else {
      e.shapes[i].clear();
    }
  }
  e.last_used.store(now, std::memory_order_relaxed);
  auto state = step.kernel->specialize(
      ep::SpecializeContext(*step.info, n, e.dtypes.data(), e.shapes.data(), ctx.pool().num_threads()));
  if (!state.ok()) {
    c.prebound.store(-1, std::memory_order_relaxed);
    return state.status();
  }
  e.state = std::move(state).value();
  e.valid = true;
  c.prebound.store(static_cast<int>(slot), std::memory_order_relaxed);
  ctx.set_variant_entry(static_cast<int>(slot));
  return e.state;
}

void collect_graph_attrs(const ir::Node& node, std::vector<std::pair<std::string, const ir::Graph*>>* out) {
  for (const auto& a : node.attributes) {
    if (a.g) out->push_back({a.name, a.g.get()});
    for (const auto& g : a.graphs) {
      if (g) out->push_back({a.name, g.get()});
    }
  }
}


}  // namespace

const Value* Frame::lookup(const std::string& name) const {
  for (const Frame* f = this; f; f = f->parent) {
    int s = f->plan ? f->plan->slot(name) : -1;
    if (s >= 0) {
      const Value& v = f->slots[static_cast<size_t>(s)];
      if (!v.is_none()) return &v;
    }
  }
  return nullptr;
}

std::vector<std::string> free_names(const ir::Graph& graph) {
  std::unordered_set<std::string> defined;
  for (const auto& i : graph.inputs) defined.insert(i.name);
  for (const auto& [n, t] : graph.initializers) defined.insert(n);
  for (const auto& node : graph.nodes) {
    for (const auto& o : node.outputs) {
      if (!o.empty()) defined.insert(o);
    }
  }
  std::set<std::string> free;
  for (const auto& node : graph.nodes) {
    for (const auto& i : node.inputs) {
      if (!i.empty() && !defined.count(i)) free.insert(i);
    }
    std::vector<std::pair<std::string, const ir::Graph*>> subs;
    collect_graph_attrs(node, &subs);
    for (const auto& [an, g] : subs) {
      for (const auto& n : free_names(*g)) {
        if (!defined.count(n)) free.insert(n);
      }
    }
  }
  for (const auto& o : graph.outputs) {
    if (!defined.count(o.name)) free.insert(o.name);
  }
  return {free.begin(), free.end()};
}

Result<std::unique_ptr<GraphPlan>> GraphPlan::build(const ir::Graph& graph, const PlanEnv& env,
                                                    const std::vector<std::string>& outer_names) {
  auto plan = std::unique_ptr<GraphPlan>(new GraphPlan());
  plan->graph_ = &graph;
  auto add_slot = [&](const std::string& name) {
    auto [it, inserted] = plan->slot_of_.emplace(name, static_cast<int>(plan->slot_names_.size()));
    if (inserted) plan->slot_names_.push_back(name);
    return it->second;
  };

  // Slots: inputs, initializers, node outputs.
  for (const auto& in : graph.inputs) plan->input_slots_.push_back(add_slot(in.name));
  std::unordered_set<std::string> overridable;
  for (const auto& in : graph.inputs) overridable.insert(in.name);
  for (const auto& [name, t] : graph.initializers) {
    int s = add_slot(name);
    plan->constants_.push_back({s, &t});
  }
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (const auto& o : graph.nodes[i].outputs) {
      if (o.empty()) continue;
      if (producer.count(o) || (graph.find_input(o) && !graph.initializers.count(o))) {
        return invalid_model("graph '" + graph.name + "': value '" + o + "' is produced twice (" +
                             graph.nodes[i].label() + ")");
      }
      producer[o] = i;
      add_slot(o);
    }
  }
  std::unordered_set<std::string> outer(outer_names.begin(), outer_names.end());
  auto resolve = [&](const std::string& name, const ir::Node* user) -> Result<int> {
    auto it = plan->slot_of_.find(name);
    if (it != plan->slot_of_.end()) return it->second;
    if (outer.count(name)) {
      int s = add_slot(name);
      plan->outer_refs_.push_back({s, name});
      return s;
    }
    return invalid_model("graph '" + graph.name + "': " + (user ? user->label() + " reads '" : "output '") + name +
                         "', which no node produces and is neither a graph input nor an initializer");
  };

  // Dependencies per node: explicit inputs plus names its subgraphs capture.
  const size_t n = graph.nodes.size();
  std::vector<std::vector<int>> reads(n);
  for (size_t i = 0; i < n; ++i) {
    const ir::Node& node = graph.nodes[i];
    for (const auto& in : node.inputs) {
      if (in.empty()) continue;
      NXRT_ASSIGN_OR_RETURN(int s, resolve(in, &node));
      reads[i].push_back(s);
    }
    std::vector<std::pair<std::string, const ir::Graph*>> subs;
    collect_graph_attrs(node, &subs);
    for (const auto& [an, g] : subs) {
      for (const auto& name : free_names(*g)) {
        NXRT_ASSIGN_OR_RETURN(int s, resolve(name, &node));
        reads[i].push_back(s);
      }
    }
  }
  for (const auto& o : graph.outputs) {
    NXRT_ASSIGN_OR_RETURN(int s, resolve(o.name, nullptr));
    plan->output_slots_.push_back(s);
  }

  // Topological order (Kahn), stable with respect to the file's order.
  std::vector<int> indeg(n, 0);
  std::vector<std::vector<size_t>> users(n);
  for (size_t i = 0; i < n; ++i) {
    std::unordered_set<size_t> deps;
    for (int s : reads[i]) {
      auto it = producer.find(plan->slot_names_[static_cast<size_t>(s)]);
      if (it != producer.end() && deps.insert(it->second).second) {
        users[it->second].push_back(i);
        ++indeg[i];
      }
    }
  }
  std::vector<size_t> order;
  std::set<size_t> ready;
  for (size_t i = 0; i < n; ++i) {
    if (indeg[i] == 0) ready.insert(i);
  }
  while (!ready.empty()) {
    size_t i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (size_t u : users[i]) {
      if (--indeg[u] == 0) ready.insert(u);
    }
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i) {
      if (indeg[i] > 0) return invalid_model("graph '" + graph.name + "' has a cycle through " + graph.nodes[i].label());
    }
  }

  // Readers per slot (node inputs and subgraph captures), to find initializers read by one node only.
  std::vector<int> readers(plan->slot_names_.size(), 0);
  for (const auto& r : reads)
    for (int s : r) ++readers[static_cast<size_t>(s)];
  for (int s : plan->output_slots_) readers[static_cast<size_t>(s)] += 2;  // a graph output: always kept

  // Kernels.
  std::vector<std::string> inner_outer(outer_names);
  for (const auto& name : plan->slot_names_) inner_outer.push_back(name);
  for (size_t idx : order) {
    const ir::Node& node = graph.nodes[idx];
    PlanStep step;
    step.node = &node;
    step.node_index = idx;
    int64_t opset = env.model->opset_for(node.domain);
    std::string dom = node.domain.empty() ? "ai.onnx" : node.domain;
    if (opset == 0) {
      // ai.onnx.ml and other domains are sometimes used without an import; the default domain never.
      if (node.domain.empty()) {
        return invalid_model(node_prefix(node, idx, 0) + ": the model does not import the ai.onnx opset");
      }
      opset = 1;
    }
    const ep::KernelDef* def = env.registry->find(node.domain, node.op_type, opset);
    if (!def) {
      std::string why = env.registry->knows(node.domain, node.op_type)
                            ? "the CPU provider implements " + dom + "::" + node.op_type + " but not at opset " +
                                  std::to_string(opset)
                            : "the CPU provider has no kernel for " + dom + "::" + node.op_type;
      return not_implemented(node_prefix(node, idx, opset) + ": unsupported op: " + why);
    }
    step.info = std::make_unique<ep::KernelInfo>(node, opset);
    step.info->graph_ = &graph;
    step.info->registry_ = env.registry;
    step.info->overrides_ = env.overrides;
    step.info->const_inputs_.assign(node.inputs.size(), nullptr);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const std::string& in = node.inputs[i];
      if (in.empty()) continue;
      auto it = graph.initializers.find(in);
      if (it != graph.initializers.end() && !overridable.count(in)) step.info->const_inputs_[i] = &it->second;
    }
    std::vector<std::pair<std::string, const ir::Graph*>> subs;
    collect_graph_attrs(node, &subs);
    for (const auto& [an, g] : subs) {
      NXRT_ASSIGN_OR_RETURN(auto sub, GraphPlan::build(*g, env, inner_outer));
      step.subgraphs.push_back(std::make_unique<PlannedSubgraph>(std::move(sub)));
      step.info->subgraphs_[an] = step.subgraphs.back().get();
    }
    auto kernel = def->factory(*step.info);
    if (!kernel.ok()) {
      const Status& s = kernel.status();
      if (s.message().rfind("node '", 0) == 0) return s;
      return s.with_context(node_prefix(node, idx, opset) + ": ");
    }
    step.kernel = std::move(kernel).value();
    if (env.release_initializer && outer_names.empty()) {
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (!step.info->const_inputs_[i] || step.kernel->reads_const_input_data(i)) continue;
        if (readers[static_cast<size_t>(plan->slot(node.inputs[i]))] == 1) env.release_initializer(node.inputs[i]);
      }
    }
    step.inplace_input = def->inplace_input;
    step.capture_decline = def->capture_decline;
    step.reads = reads[idx];
    for (const auto& in : node.inputs) step.inputs.push_back(in.empty() ? -1 : plan->slot(in));
    for (const auto& o : node.outputs) step.outputs.push_back(o.empty() ? -1 : plan->slot(o));
    plan->steps_.push_back(std::move(step));
  }

  // Last uses: a slot dies after the last step that reads it, unless it is a graph output.
  std::vector<int> last_use(plan->slot_names_.size(), -1);
  std::vector<bool> keep(plan->slot_names_.size(), false);
  for (int s : plan->output_slots_) keep[static_cast<size_t>(s)] = true;
  for (size_t k = 0; k < order.size(); ++k) {
    for (int s : reads[order[k]]) last_use[static_cast<size_t>(s)] = static_cast<int>(k);
  }
  for (size_t s = 0; s < last_use.size(); ++s) {
    if (keep[s] || last_use[s] < 0) continue;
    plan->steps_[static_cast<size_t>(last_use[s])].release_after.push_back(static_cast<int>(s));
  }
  // Outputs nobody reads die right after the step that makes them.
  for (size_t k = 0; k < plan->steps_.size(); ++k) {
    for (int s : plan->steps_[k].outputs) {
      if (s >= 0 && !keep[static_cast<size_t>(s)] && last_use[static_cast<size_t>(s)] < 0) {
        plan->steps_[k].release_after.push_back(s);
      }
    }
  }
  plan_concat_groups(*plan, graph, producer, readers, keep);
  return plan;
}

// See ConcatGroup. `readers` counts node inputs and subgraph captures per slot (graph outputs +2).
void GraphPlan::plan_concat_groups(GraphPlan& plan, const ir::Graph& graph,
                                   const std::unordered_map<std::string, size_t>& producer,
                                   const std::vector<int>& readers, const std::vector<bool>& keep) {
  static const bool disabled = [] {
    const char* e = std::getenv("NXRT_CONCAT_IN_PLACE");
    return e && std::strcmp(e, "0") == 0;
  }();
  if (disabled || !graph.shape_facts) return;
  const ir::ShapeFacts& facts = *graph.shape_facts;
  auto static_dims = [&](const std::string& name, DataType* dt, Dims* dims) {
    const ir::ValueFacts* f = facts.find(name);
    if (!f || f->kind != ir::TypeInfo::Kind::kTensor || !f->is_static()) return false;
    *dt = f->dtype;
    dims->clear();
    for (const auto& d : f->dims) dims->push_back(d.value);
    return true;
  };
  // Slot -> (group, input) for the producers' outputs; a group's output slot -> the group.
  std::unordered_map<int, PlacedOutput> placed;
  std::unordered_map<int, int> group_of_out;
  for (PlanStep& step : plan.steps_) {
    const ir::Node& node = *step.node;
    if (!node.domain.empty() || node.op_type != "Concat" || node.outputs.empty() || step.outputs[0] < 0) continue;
    const int out_slot = step.outputs[0];
    if (keep[static_cast<size_t>(out_slot)]) continue;  // a graph output (may be caller-bound)
    ConcatGroup cg;
    cg.out_slot = out_slot;
    if (!static_dims(node.outputs[0], &cg.dtype, &cg.out_shape)) continue;
    if (cg.dtype == DataType::kString || cg.dtype == DataType::kUndefined || dtype_is_subbyte(cg.dtype)) continue;
    int64_t axis = step.info->attr_int("axis", 1);
    const int64_t rank = static_cast<int64_t>(cg.out_shape.size());
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) continue;
    bool ok = true;
    for (int64_t d = 0; d < axis; ++d) ok = ok && cg.out_shape[static_cast<size_t>(d)] == 1;
    int64_t offset = 0, along = 0;
    const int64_t es = static_cast<int64_t>(dtype_storage_bytes(cg.dtype, 1));
    std::unordered_set<std::string> seen;
    std::vector<int> members;
    for (size_t j = 0; ok && j < node.inputs.size(); ++j) {
      const std::string& in = node.inputs[j];
      DataType dt;
      Dims dims;
      if (in.empty() || !static_dims(in, &dt, &dims) || dt != cg.dtype || dims.size() != cg.out_shape.size()) {
        ok = false;
        break;
      }
      cg.in_shapes.push_back(dims);
      cg.byte_offsets.push_back(offset);
      offset += shape_numel(dims) * es;
      along += dims[static_cast<size_t>(axis)];
      const int slot = step.inputs[j];
      // A member: made by a node of this graph, read by this Concat alone, once; or the output of an
      // earlier group's Concat, read once here (its other readers only read it: their outputs are
      // never placed over a buffer others reference, see try_inplace).
      const auto earlier = group_of_out.find(slot);
      const bool chained = slot >= 0 && earlier != group_of_out.end() &&
                           plan.concat_groups_[static_cast<size_t>(earlier->second)].parent < 0 &&
                           std::count(step.inputs.begin(), step.inputs.end(), slot) == 1;
      if (producer.count(in) && slot >= 0 && (readers[static_cast<size_t>(slot)] == 1 || chained) &&
          seen.insert(in).second && !placed.count(slot)) {
        members.push_back(static_cast<int>(j));
      }
    }
    if (!ok || members.empty() || along != cg.out_shape[static_cast<size_t>(axis)] ||
        offset != shape_numel(cg.out_shape) * es) {
      continue;
    }
    const int g = static_cast<int>(plan.concat_groups_.size());
    for (int j : members) {
      const int slot = step.inputs[static_cast<size_t>(j)];
      placed[slot] = PlacedOutput{g, j};
      const auto earlier = group_of_out.find(slot);
      if (earlier != group_of_out.end()) {
        plan.concat_groups_[static_cast<size_t>(earlier->second)].parent = g;
        plan.concat_groups_[static_cast<size_t>(earlier->second)].parent_input = j;
      }
    }
    step.concat_group = g;
    group_of_out[out_slot] = g;
    plan.concat_groups_.push_back(std::move(cg));
  }
  if (placed.empty()) return;
  for (PlanStep& step : plan.steps_) {
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      auto it = placed.find(step.outputs[i]);
      if (it == placed.end()) continue;
      if (step.placed.empty()) step.placed.resize(step.outputs.size());
      step.placed[i] = it->second;
    }
  }
}

Status GraphPlan::prepare_frame(Frame& frame) const {
  for (const auto& [slot, t] : constants_) {
    Value& v = frame.slots[static_cast<size_t>(slot)];
    if (v.is_none()) v = Value(*t);
  }
  for (const auto& [slot, name] : outer_refs_) {
    const Value* v = frame.parent ? frame.parent->lookup(name) : nullptr;
    if (!v) return runtime_error("outer-scope value '" + name + "' is not available");
    frame.slots[static_cast<size_t>(slot)] = *v;
  }
  return Status::Ok();
}

Status GraphPlan::run_step(size_t k, Frame& frame, ep::ThreadPool& pool, const char* capture_tag,
                           const std::string* why) const {
  const PlanStep& step = steps_[k];
  const bool observed = frame.hooks && frame.hooks->active();
  ExecContext ctx(step, frame, pool);
  double t0 = observed ? monotonic_us() : 0;
  const PoolActivity pool0 = observed ? PoolActivity::of(pool) : PoolActivity{};
  Status s;
  try {
    s = ctx.bind_inputs();
    if (s.ok() && frame.res) {
      auto v = lookup_variant(step, ctx, *frame.res);
      if (v.ok()) {
        ctx.set_variant(std::move(v).value());
      } else {
        s = v.status();
      }
    }
    if (s.ok()) s = step.kernel->compute(ctx);
    if (s.ok()) s = ctx.finish_bound_outputs();
  } catch (const AllocationError& e) {
    // Allocation failure is an error value like any other, never an abort: the memory limit, a
    // shape too large to allocate, a failed (or, in tests, injected) allocation.
    s = ctx.error(e.what(), StatusCode::kRuntimeError);
  } catch (const std::bad_alloc&) {
    s = ctx.error("out of memory", StatusCode::kRuntimeError);
  } catch (const std::exception& e) {
    // A library call inside a kernel that throws (std::length_error from a size no vector can
    // take, ...) is a failed node, not a terminated process.
    s = ctx.error(std::string("internal error: ") + e.what(), StatusCode::kRuntimeError);
  }
  if (observed) {
    record_step(*frame.hooks, step, ctx.input_array(), ctx.num_inputs(), ctx.variant_entry(), t0, monotonic_us() - t0,
                PoolActivity::of(pool).since(pool0), capture_tag, why);
  }
  if (!s.ok()) {
    if (s.message().rfind("node '", 0) == 0) return s;
    return ctx.error(s.message(), s.code());
  }
  for (size_t i = 0; i < step.outputs.size(); ++i) {
    int o = step.outputs[i];
    if (o >= 0 && frame.slots[static_cast<size_t>(o)].is_none()) {
      return ctx.error("the kernel did not produce output " + std::to_string(i) + " ('" + step.node->outputs[i] +
                       "')");
    }
  }
  if (frame.observer) NXRT_RETURN_IF_ERROR(frame.observer->after_step(k, ctx));
  for (int r : step.release_after) frame.slots[static_cast<size_t>(r)] = Value();
  return Status::Ok();
}

Status GraphPlan::execute(Frame& frame, ep::ThreadPool& pool, size_t first) const {
  for (size_t k = first; k < steps_.size(); ++k) NXRT_RETURN_IF_ERROR(run_step(k, frame, pool));
  return Status::Ok();
}

void GraphPlan::clear_frame(Frame& frame) {
  for (auto& v : frame.slots) v = Value();
}

void GraphPlan::for_each_cache(const std::function<void(const NodeKernelCache&)>& fn) const {
  for (const PlanStep& step : steps_) {
    fn(step.cache);
    for (const auto& sub : step.subgraphs) {
      if (auto* p = dynamic_cast<const PlannedSubgraph*>(sub.get())) p->plan().for_each_cache(fn);
    }
  }
}

}  // namespace nxrt::session
