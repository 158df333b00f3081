// The capture classifier and the schedule it produces: which steps of a graph plan a captured replay
// records (segments) and which stay eager (seams), each seam with its reason.
//
// A replay reruns recorded kernels at recorded shapes, so a node may be recorded only when its shapes
// cannot change between steady decode steps. The classifier decides that from load-time shape
// inference (ir::Graph::shape_facts): it seeds a set of symbols whose extent changes from step to
// step and closes it over the symbol lineage inference recorded; a node any of whose input or output
// shapes mentions a symbol of the set stays eager.
//
//   seeds   the sequence axis of every KV input/output of an attention op (GroupQueryAttention past 3,4
//           / present 1,2; ONNX Attention past 4,5 / present 1,2; com.microsoft Attention past 4 /
//           present 1; MultiHeadAttention past 6,7 / present 1,2; TensorScatter's cache on `axis`),
//           the penultimate axis of every rank-4 graph input named past* and output named present*,
//           the last axis of a graph input named *attention_mask* (past + new tokens), and opaque
//           symbols (an extent inference could not compute: division by zero).
//           Fail-safe mode (the default) also seeds every symbol without provenance: one that is not
//           unified with a graph input's dim (which the caller's binding fixes) nor derived from other
//           dims (minted for a data-dependent extent, or named only on a graph output): unknown means
//           eager. Denylist mode (NXRT_CAPTURE_CLASSIFIER=denylist) trusts everything not proven
//           growing.
//   closure symbols unified with a member (the same extent, both ways), and symbols derived from a
//           member (source -> derived only: a growing seq does not make batch grow).
//   pins    a fixed-capacity KV cache (a past input and present output bound to one caller buffer,
//           the valid length read by the kernel as data: GroupQueryAttention seqlens_k, TensorScatter
//           write_indices) keeps its shape from step to step. Its values are pinned (their edges count
//           as fixed), and the symbols on their sequence axes are pinned as constants when nothing else
//           in the graph I/O carries them (an attention mask that grows shares `total_sequence_length`
//           with the present outputs of a GroupQueryAttention export: that symbol keeps growing).
//           The set is then recomputed without the pinned symbols.
//
// Other seams: host control flow (If, Loop, Scan: the host picks the branch or trip count), outputs
// whose shape depends on input data (a symbol without provenance first seen on the node's outputs),
// kernels that
// decline (Kernel::capture_support, KernelDef::capture_decline), non-tensor values, and (fail-safe)
// values with no load-time shape.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/symbols.h"
#include "session/executor.h"

namespace nxrt::session {

enum class ClassifierMode { kFailSafe, kDenylist };

// NXRT_CAPTURE_CLASSIFIER: "denylist" (or "deny", "0") selects kDenylist; anything else kFailSafe.
ClassifierMode classifier_mode_from_env();
const char* classifier_mode_name(ClassifierMode m);

// A past graph input and a present graph output bound to one fixed-capacity buffer.
struct SharedKvPair {
  std::string past;
  std::string present;
};

struct ScheduleEntry {
  bool captured = false;
  std::string reason;  // seams: why the node stays eager
};

struct CaptureSchedule {
  ClassifierMode mode = ClassifierMode::kFailSafe;
  std::vector<ScheduleEntry> steps;     // one per plan step
  std::set<std::string> pinned_values;  // KV values pinned by shared buffers
  std::vector<std::string> pinned_symbols;   // "past_sequence_length (past_key_values.0.key ...)"
  std::vector<std::string> growing_symbols;  // the disqualifying set, "name: why"
  size_t captured_steps() const;
  size_t segments() const;  // runs of consecutive captured steps
  // Segments, seams and reasons, one line each ("segment 1: steps 0-3 (4 nodes) ...").
  std::string describe(const GraphPlan& plan) const;
};

// Classifies every step of `plan` (the main graph's; subgraph steps run inside their seam).
CaptureSchedule build_capture_schedule(const GraphPlan& plan, ClassifierMode mode,
                                       const std::vector<SharedKvPair>& shared_kv);

// The KV pairs of `plan`'s graph that can be pinned when bound to one buffer: (past input, present
// output) of one rank-4 cache whose present is written by a capacity-aware op (GroupQueryAttention with
// seqlens_k, TensorScatter) reading that past.
std::vector<SharedKvPair> pinnable_kv_pairs(const GraphPlan& plan);

}  // namespace nxrt::session
