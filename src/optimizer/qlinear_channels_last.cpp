// Level-all pass: chains of 8-bit convs run channels-last, as onnxruntime's NHWC transformer arranges
// them. QLinearConv's integer GEMM gathers its patches from a channels-last copy of X and writes its
// sums pixel by pixel, so in NCHW every conv pays two layout passes (X to channels-last, Y back); here
// each eligible QLinearConv becomes com.microsoft QLinearConv with channels_last = 1 between Transposes
// (to [N, H, W, C] before, back to NCHW after), and what lies between two such convs stays
// channels-last: a Transpose back then forward is never made (the next conv reads the channels-last
// value itself), and QLinearAdd / QLinearMul of two same-shaped channels-last values (or of one and a
// [1, C, 1, 1] per-channel operand, transposed on its own), QLinearConcat
// along the channels, QLinearSigmoid / QLinearLeakyRelu / nxrt::ByteTable, QLinearGlobalAveragePool and
// QLinearAveragePool run on them directly (the elementwise ops do not care about the layout; Concat's axis and the pools' channels_last follow it), and MaxPool becomes
// com.microsoft NhwcMaxPool (8-bit, pool/max_pool_8bit.h). Transposes back to NCHW
// that no one reads are dropped by the dead-code pass after it. The kernels compute the same sums in
// the same order either way, so outputs are byte for byte those of the NCHW graph.
//
// Eligible: ai.onnx QLinearConv over rank-4 X with constant 8-bit W and weight zero point, and at least
// 8 outputs per group (the integer GEMM path) or depthwise (the channels-last depthwise path; other small
// groups take the float or double engines, which are NCHW), on a tier with the 8-bit GEMM (AVX2 and up:
// ops/linalg/qgemm_u8s8.h) and without the reference kernels.
#include "ir/symbols.h"
#include "optimizer/passes.h"
#include "optimizer/rewrite.h"

namespace nxrt::optimizer {

namespace {

constexpr const char* kMs = "com.microsoft";

bool is_ms(const ir::Node& n, const char* op) {
  return n.op_type == op && (n.domain == kMs);
}

// Load-time facts of `name` when it is known to have rank 4 (its dims may be symbols: a dynamic batch).
const ir::ValueFacts* rank4(const ir::Graph& g, const std::string& name) {
  const ir::ValueFacts* f = g.shape_facts ? g.shape_facts->find(name) : nullptr;
  return f && f->has_shape && f->dims.size() == 4 ? f : nullptr;
}

bool eligible_conv(GraphInfo& gi, const ir::Node& n) {
  if (!is_onnx(&n, "QLinearConv") || n.inputs.size() < 8 || n.outputs.size() != 1 || n.inputs[0].empty()) return false;
  if (attr_i(n, "channels_last", 0) != 0 || !rank4(gi.g, n.inputs[0])) return false;
  const Tensor* w = gi.constant(n.inputs[3]);
  if (!w || w->rank() != 4 || (w->dtype() != DataType::kUInt8 && w->dtype() != DataType::kInt8)) return false;
  // Both channels-last paths prepare the weights, with their zero point, at creation.
  if (n.inputs.size() > 5 && !n.inputs[5].empty() && !gi.constant(n.inputs[5])) return false;
  const int64_t group = attr_i(n, "group", 1);
  if (group >= 1 && w->dim(0) % group == 0 && w->dim(0) / group >= 8) return true;
  // A depthwise conv (one input and one output channel a group): the kernel's channels-last depthwise path.
  return group > 1 && w->dim(0) == group && w->dim(1) == 1;
}

}  // namespace

int qlinear_channels_last(PassContext& pc, GraphInfo& gi) {
  if (pc.options->isa < ep::IsaTier::kAvx2 || pc.options->reference_kernels) return 0;
  ir::Graph& g = gi.g;
  bool any = false;
  for (const ir::Node& n : g.nodes) any |= eligible_conv(gi, n);
  if (!any) return 0;
  std::unordered_map<std::string, std::string> last;  // an NCHW value -> its channels-last twin
  std::vector<ir::Node> out;
  out.reserve(g.nodes.size() * 2);
  int converted = 0;
  auto transpose = [&](const std::string& from, const std::string& to, std::vector<int64_t> perm) {
    ir::Node t = make_node(pc.fresh_name(g, to + "_transpose"), "", "Transpose", {from}, {to});
    t.attributes.push_back(make_attr_is("perm", std::move(perm)));
    out.push_back(std::move(t));
  };
  // The channels-last twin of NCHW value v (a Transpose made here unless one exists).
  auto to_last = [&](const std::string& v) {
    auto it = last.find(v);
    if (it != last.end()) return it->second;
    const std::string t = pc.fresh_name(g, v + "_nhwc");
    transpose(v, t, {0, 2, 3, 1});
    last[v] = t;
    return t;
  };
  // Node n rewritten to write the channels-last twin of its output (and a Transpose back to the name).
  auto emit_last = [&](ir::Node n) {
    const std::string y = n.outputs[0], t = pc.fresh_name(g, y + "_nhwc");
    n.outputs[0] = t;
    out.push_back(std::move(n));
    transpose(t, y, {0, 3, 1, 2});
    last[y] = t;
  };
  for (ir::Node& n : g.nodes) {
    if (eligible_conv(gi, n)) {
      ir::Node c = n;
      c.domain = kMs;
      c.inputs[0] = to_last(n.inputs[0]);
      c.attributes.push_back(make_attr_i("channels_last", 1));
      emit_last(std::move(c));
      ++converted;
      continue;
    }
    if ((is_ms(n, "QLinearAdd") || is_ms(n, "QLinearMul")) && n.inputs.size() >= 8 && n.outputs.size() == 1 &&
        (last.count(n.inputs[0]) || last.count(n.inputs[3]))) {
      const ir::ValueFacts* a = rank4(g, n.inputs[0]);
      const ir::ValueFacts* b = rank4(g, n.inputs[3]);
      bool same = a && b && last.count(n.inputs[0]) && last.count(n.inputs[3]);
      for (size_t i = 0; same && i < 4; ++i) same = a->dims[i] == b->dims[i];  // equal constants or one symbol
      // Or one operand channels-last and the other one value per channel, [1, C, 1, 1] (a folded batch
      // norm's scale or shift): that one's own small Transpose makes it [1, 1, 1, C].
      auto per_channel = [&](const ir::ValueFacts* f) {
        const ir::SymDim one = ir::SymDim::c(1);
        return f && f->dims[0] == one && f->dims[2] == one && f->dims[3] == one;
      };
      const bool a_last = last.count(n.inputs[0]) && per_channel(b), b_last = last.count(n.inputs[3]) && per_channel(a);
      if (same || a_last || b_last) {
        ir::Node e = n;
        e.inputs[0] = to_last(n.inputs[0]);
        e.inputs[3] = to_last(n.inputs[3]);
        emit_last(std::move(e));
        continue;
      }
    }
    if (is_ms(n, "QLinearConcat") && n.outputs.size() == 1 && n.inputs.size() >= 5 && (n.inputs.size() - 2) % 3 == 0 &&
        rank4(g, n.outputs[0])) {
      const int64_t axis = attr_i(n, "axis", 0);
      bool all = axis == 1 || axis == -3;
      for (size_t i = 2; all && i < n.inputs.size(); i += 3) all = last.count(n.inputs[i]) != 0;
      if (all) {
        ir::Node e = n;
        for (size_t i = 2; i < e.inputs.size(); i += 3) e.inputs[i] = last[n.inputs[i]];
        for (ir::Attribute& at : e.attributes)
          if (at.name == "axis") at.i = 3;
        emit_last(std::move(e));
        continue;
      }
    }
    if (is_onnx(&n, "MaxPool") && n.outputs.size() == 1 && n.inputs.size() == 1 && last.count(n.inputs[0]) &&
        attr_i(n, "storage_order", 0) == 0 && rank4(g, n.inputs[0])) {
      // (its input has a channels-last twin, so it is 8-bit: a conv's output or a value made of them)
      ir::Node e = n;
      e.domain = kMs;
      e.op_type = "NhwcMaxPool";
      e.inputs[0] = last[n.inputs[0]];
      emit_last(std::move(e));
      continue;
    }
    // Elementwise 8-bit ops of one activation: the same bytes in either layout.
    if ((is_ms(n, "QLinearSigmoid") || is_ms(n, "QLinearLeakyRelu") ||
         (n.op_type == "ByteTable" && n.domain == ir::kNxrtDomain)) &&
        n.outputs.size() == 1 && !n.inputs.empty() && last.count(n.inputs[0]) && rank4(g, n.outputs[0])) {
      ir::Node e = n;
      e.inputs[0] = last[n.inputs[0]];
      emit_last(std::move(e));
      continue;
    }
    if ((is_ms(n, "QLinearGlobalAveragePool") || is_ms(n, "QLinearAveragePool")) && attr_i(n, "channels_last", 0) == 0 && n.outputs.size() == 1 &&
        !n.inputs.empty() && last.count(n.inputs[0]) && rank4(g, n.inputs[0])) {
      ir::Node e = n;
      e.inputs[0] = last[n.inputs[0]];
      std::erase_if(e.attributes, [](const ir::Attribute& at) { return at.name == "channels_last"; });
      e.attributes.push_back(make_attr_i("channels_last", 1));
      emit_last(std::move(e));
      continue;
    }
    out.push_back(n);
  }
  g.nodes = std::move(out);
  pc.count("qlinear_channels_last", converted);
  return converted;
}

}  // namespace nxrt::optimizer
