#include "optimizer/optimizer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>

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

Result<OptLevel> opt_level_from_env(OptLevel dflt) {
  const char* e = std::getenv("NXRT_OPT_LEVEL");
  if (!e || !*e) return dflt;
  if (!std::strcmp(e, "disabled") || !std::strcmp(e, "0")) return OptLevel::kDisabled;
  if (!std::strcmp(e, "basic") || !std::strcmp(e, "1")) return OptLevel::kBasic;
  if (!std::strcmp(e, "all") || !std::strcmp(e, "2") || !std::strcmp(e, "extended")) return OptLevel::kAll;
  // A typo must not silently run at another level than the one asked for.
  return invalid_argument(std::string("NXRT_OPT_LEVEL=") + e +
                          ": the value must be one of disabled|basic|all (or 0|1|2, extended)");
}

namespace {

using Pass = int (*)(PassContext&, GraphInfo&);

// How often a pass runs.
enum class Repeat {
  kOnce,
  kWhileChanging,  // again while it rewrites something, at most kMaxRuns runs
  kInRound,        // with the adjacent kInRound passes as one round, repeated while any of them rewrites
                   // something, at most kMaxRuns rounds
};
constexpr int kMaxRuns = 4;

struct PassSpec {
  const char* name;  // Stats::pass_ms key
  Pass run;
  OptLevel level;    // the lowest level it runs at
  Repeat repeat;
};

// Every pass, in the order they run on each graph.
constexpr PassSpec kPasses[] = {
    // Before constant folding, which would turn the dequantized weights into float initializers.
    {"fuse_dq_matmul", &fuse_dq_matmul, OptLevel::kAll, Repeat::kOnce},
    {"fuse_qdq", &fuse_qdq, OptLevel::kAll, Repeat::kOnce},
    // After fuse_qdq (its 8-bit ops take their groups first), before folding could merge the chains'
    // scalar constants into other shapes.
    {"fuse_qdq_table", &fuse_qdq_table, OptLevel::kAll, Repeat::kOnce},
    // The weights' DequantizeLinear nodes fuse_qdq left unread, before folding would widen them to float.
    {"remove_dead_code", &remove_dead_code, OptLevel::kAll, Repeat::kOnce},
    // After fuse_dq_matmul (which reads the float16 scales of DequantizeLinear as they are), before
    // constant folding, which turns the widened float16 initializers into float32 ones.
    {"compute_float16_in_float32", &compute_float16_in_float32, OptLevel::kBasic, Repeat::kOnce},
    {"fold_constants", &fold_constants, OptLevel::kBasic, Repeat::kInRound},
    {"eliminate_identities", &eliminate_identities, OptLevel::kBasic, Repeat::kInRound},
    {"fold_shapes", &fold_shapes, OptLevel::kBasic, Repeat::kInRound},
    {"remove_dead_code", &remove_dead_code, OptLevel::kBasic, Repeat::kInRound},
    {"fold_conv_bn", &fold_conv_bn, OptLevel::kAll, Repeat::kOnce},
    {"fold_conv_affine", &fold_conv_affine, OptLevel::kAll, Repeat::kWhileChanging},
    {"fold_bn_affine", &fold_bn_affine, OptLevel::kAll, Repeat::kWhileChanging},
    {"fold_affine_into_pointwise_conv", &fold_affine_into_pointwise_conv, OptLevel::kAll, Repeat::kOnce},
    {"fuse_bn_relu", &fuse_bn_relu, OptLevel::kAll, Repeat::kOnce},
    {"fuse_layer_norm", &fuse_layer_norm, OptLevel::kAll, Repeat::kOnce},
    {"fuse_rms_norm", &fuse_rms_norm, OptLevel::kAll, Repeat::kOnce},
    {"fuse_gelu", &fuse_gelu, OptLevel::kAll, Repeat::kOnce},
    {"fuse_attention", &fuse_attention, OptLevel::kAll, Repeat::kOnce},
    {"fuse_hard_swish", &fuse_hard_swish, OptLevel::kAll, Repeat::kOnce},  // before fuse_activation takes it
    {"fuse_silu", &fuse_silu, OptLevel::kAll, Repeat::kOnce},
    {"fuse_activation", &fuse_activation, OptLevel::kAll, Repeat::kOnce},
    {"fuse_preact_conv", &fuse_preact_conv, OptLevel::kAll, Repeat::kOnce},  // after fuse_bn_relu, fuse_activation
    {"fuse_channel_shuffle", &fuse_channel_shuffle, OptLevel::kAll, Repeat::kOnce},  // after fuse_preact_conv
    {"fuse_conv_max_pool", &fuse_conv_max_pool, OptLevel::kAll, Repeat::kOnce},  // after the three above
    {"fuse_matmul_integer_to_float", &fuse_matmul_integer_to_float, OptLevel::kAll, Repeat::kOnce},
    {"fuse_sibling_matmulnbits", &fuse_sibling_matmulnbits, OptLevel::kAll, Repeat::kOnce},
    {"fuse_matmulnbits_silu_mul", &fuse_matmulnbits_silu_mul, OptLevel::kAll, Repeat::kOnce},  // after the two above
    {"fuse_sibling_pointwise_conv", &fuse_sibling_pointwise_conv, OptLevel::kAll, Repeat::kOnce},
    {"qlinear_channels_last", &qlinear_channels_last, OptLevel::kAll, Repeat::kOnce},  // before the dead-code pass
    {"remove_dead_code", &remove_dead_code, OptLevel::kAll, Repeat::kOnce},
};

int run_pass(PassContext& pc, ir::Graph& g, bool main_graph, const PassSpec& p) {
  const auto t0 = std::chrono::steady_clock::now();
  GraphInfo gi(g, main_graph, pc.model->ir_version);
  int n = p.run(pc, gi);
  if (pc.stats) {
    const auto t1 = std::chrono::steady_clock::now();
    pc.stats->pass_ms[p.name] += std::chrono::duration<double, std::milli>(t1 - t0).count();
  }
  return n;
}

bool runs_at(const PassSpec& p, OptLevel level) {
  return level == OptLevel::kAll || (level == OptLevel::kBasic && p.level == OptLevel::kBasic);
}
bool runs_at(const PassSpec& p, const Options& o) {
  return runs_at(p, o.level) && std::find(o.disabled.begin(), o.disabled.end(), p.name) == o.disabled.end();
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
  const size_t count = std::size(kPasses);
  for (size_t i = 0; i < count;) {
    if (kPasses[i].repeat == Repeat::kInRound) {
      size_t end = i;
      while (end < count && kPasses[end].repeat == Repeat::kInRound) ++end;
      for (int round = 0; round < kMaxRuns; ++round) {
        int changed = 0;
        for (size_t k = i; k < end; ++k) {
          if (runs_at(kPasses[k], *pc.options)) changed += run_pass(pc, g, main_graph, kPasses[k]);
        }
        if (!changed) break;
      }
      i = end;
      continue;
    }
    const PassSpec& p = kPasses[i++];
    if (!runs_at(p, *pc.options)) continue;
    const int runs = p.repeat == Repeat::kWhileChanging ? kMaxRuns : 1;
    for (int k = 0; k < runs && run_pass(pc, g, main_graph, p) > 0; ++k) {
    }
  }
}

}  // namespace

std::vector<std::string> pass_names() {
  std::vector<std::string> names;
  for (const PassSpec& p : kPasses) {
    if (std::find(names.begin(), names.end(), p.name) == names.end()) names.push_back(p.name);
  }
  return names;
}

Status optimize(ir::Model& model, const Options& options, Stats* stats) {
  const std::vector<std::string> known = pass_names();
  for (const std::string& d : options.disabled) {
    if (std::find(known.begin(), known.end(), d) != known.end()) continue;
    std::string list;
    for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
    return invalid_argument("disabled_optimizers: '" + d + "' is no optimizer pass (the passes: " + list + ")");
  }
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
