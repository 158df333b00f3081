#include "optimizer/optimizer.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "optimizer/passes.h"

namespace nxrt::optimizer {

std::string Stats::summary() const {
  std::string s;
  for (const auto& [k, v] : counts) {
    if (!s.empty()) s += ", ";
    s += k + "=" + std::to_string(v);
  }
  if (s.empty()) s = "nothing";
  std::string t;
  for (const auto& [k, v] : pass_ms) t += (t.empty() ? "" : ", ") + k + " " + std::to_string(v).substr(0, std::to_string(v).find('.') + 2) + " ms";
  return s + (t.empty() ? "" : "; time: " + t);
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

int run_pass(PassContext& pc, ir::Graph& g, bool main_graph, Pass pass, const char* name) {
  const auto t0 = std::chrono::steady_clock::now();
  GraphInfo gi(g, main_graph, pc.model->ir_version);
  int n = pass(pc, gi);
  if (pc.stats) {
    pc.stats->pass_ms[name] += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  return n;
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
  // Before constant folding, which would turn the dequantized weights into float initializers.
  if (level == OptLevel::kAll) run_pass(pc, g, main_graph, &fuse_dq_matmul, "fuse_dq_matmul");
  for (int round = 0; round < 4; ++round) {
    int changed = 0;
    changed += run_pass(pc, g, main_graph, &fold_constants, "fold_constants");
    changed += run_pass(pc, g, main_graph, &eliminate_identities, "eliminate_identities");
    changed += run_pass(pc, g, main_graph, &fold_shapes, "fold_shapes");
    changed += run_pass(pc, g, main_graph, &remove_dead_code, "remove_dead_code");
    if (!changed) break;
  }
  if (level == OptLevel::kAll) {
    run_pass(pc, g, main_graph, &fold_conv_bn, "fold_conv_bn");
    for (int k = 0; k < 4 && run_pass(pc, g, main_graph, &fold_conv_affine, "fold_conv_affine") > 0; ++k) {
    }
    for (int k = 0; k < 4 && run_pass(pc, g, main_graph, &fold_bn_affine, "fold_bn_affine") > 0; ++k) {
    }
    run_pass(pc, g, main_graph, &fold_affine_into_pointwise_conv, "fold_affine_into_pointwise_conv");
    run_pass(pc, g, main_graph, &fuse_bn_relu, "fuse_bn_relu");
    run_pass(pc, g, main_graph, &fuse_layer_norm, "fuse_layer_norm");
    run_pass(pc, g, main_graph, &fuse_rms_norm, "fuse_rms_norm");
    run_pass(pc, g, main_graph, &fuse_gelu, "fuse_gelu");
    run_pass(pc, g, main_graph, &fuse_attention, "fuse_attention");
    run_pass(pc, g, main_graph, &fuse_hard_swish, "fuse_hard_swish");
    run_pass(pc, g, main_graph, &fuse_silu, "fuse_silu");
    run_pass(pc, g, main_graph, &fuse_activation, "fuse_activation");
    run_pass(pc, g, main_graph, &fuse_preact_conv, "fuse_preact_conv");
    run_pass(pc, g, main_graph, &remove_dead_code, "remove_dead_code");
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
  pc.registry = options.registry;
  pc.pool = &pool;
  optimize_graph(pc, model.graph, true);
  if (std::getenv("NXRT_OPT_DUMP")) {  // debugging: the optimized main graph, one node a line
    for (const auto& n : model.graph.nodes) {
      std::string line = (n.domain.empty() ? "" : n.domain + "::") + n.op_type + "(";
      for (size_t i = 0; i < n.inputs.size(); ++i) line += (i ? ", " : "") + n.inputs[i];
      line += ") -> ";
      for (size_t i = 0; i < n.outputs.size(); ++i) line += (i ? ", " : "") + n.outputs[i];
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }
  return Status::Ok();
}

}  // namespace nxrt::optimizer
