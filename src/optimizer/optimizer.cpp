#include "optimizer/optimizer.h"

#include <cstdlib>
#include <cstring>

#include "optimizer/graph_util.h"

namespace nxrt::optimizer {

std::string Stats::summary() const {
  std::string s;
  for (const auto& [k, v] : counts) {
    if (!s.empty()) s += ", ";
    s += k + "=" + std::to_string(v);
  }
  return s.empty() ? "nothing" : s;
}

OptLevel opt_level_from_env(OptLevel dflt) {
  const char* e = std::getenv("NXRT_OPT_LEVEL");
  if (!e || !*e) return dflt;
  if (!std::strcmp(e, "disabled") || !std::strcmp(e, "0")) return OptLevel::kDisabled;
  if (!std::strcmp(e, "basic") || !std::strcmp(e, "1")) return OptLevel::kBasic;
  if (!std::strcmp(e, "all") || !std::strcmp(e, "2") || !std::strcmp(e, "extended")) return OptLevel::kAll;
  return dflt;
}

namespace {

using Pass = int (*)(PassContext&, GraphInfo&);

int run_pass(PassContext& pc, ir::Graph& g, bool main_graph, Pass pass) {
  GraphInfo gi(g, main_graph, pc.model->ir_version);
  return pass(pc, gi);
}

void optimize_graph(PassContext& pc, ir::Graph& g, bool main_graph) {
  // Subgraphs first: their outer-scope reads are recomputed from the (possibly rewritten) bodies.
  for (auto& n : g.nodes) {
    for (auto& a : n.attributes) {
      if (a.g) optimize_graph(pc, *a.g, false);
      for (auto& sg : a.graphs) {
        if (sg) optimize_graph(pc, *sg, false);
      }
    }
  }
  const OptLevel level = pc.options->level;
  for (int round = 0; round < 4; ++round) {
    int changed = 0;
    changed += run_pass(pc, g, main_graph, &fold_constants);
    changed += run_pass(pc, g, main_graph, &eliminate_identities);
    changed += run_pass(pc, g, main_graph, &fold_shapes);
    changed += run_pass(pc, g, main_graph, &remove_dead_code);
    if (!changed) break;
  }
  if (level == OptLevel::kAll) {
    run_pass(pc, g, main_graph, &fold_conv_bn);
    run_pass(pc, g, main_graph, &fuse_layer_norm);
    run_pass(pc, g, main_graph, &fuse_rms_norm);
    run_pass(pc, g, main_graph, &fuse_gelu);
    run_pass(pc, g, main_graph, &fuse_activation);
    run_pass(pc, g, main_graph, &remove_dead_code);
  }
}

}  // namespace

Status optimize(ir::Model& model, const Options& options, Stats* stats) {
  if (options.level == OptLevel::kDisabled) return Status::Ok();
  ep::ThreadPool pool(1);
  PassContext pc;
  pc.model = &model;
  pc.options = &options;
  pc.stats = stats;
  pc.registry = &ep::KernelRegistry::cpu();
  pc.pool = &pool;
  optimize_graph(pc, model.graph, true);
  return Status::Ok();
}

}  // namespace nxrt::optimizer
