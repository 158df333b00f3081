// Shape rules and op schemas: Reduce*, ArgMax/ArgMin, the Softmax family and the cumulative ops.
#include "shape/node_context.h"
#include "shape/symbolic.h"

namespace nxrt::shape {

using enum RankRule;

namespace {

Status op_reduce(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  const std::string& op = c.n->op_type;
  bool arg = op == "ArgMax" || op == "ArgMin";
  DataType dt = arg ? DataType::kInt64 : x.dtype;
  if (!x.has_shape) {
    c.set(0, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size());
  bool keep = c.ai("keepdims", 1) != 0;
  std::vector<int64_t> axes;
  if (arg) {
    axes = {c.ai("axis", 0)};
  } else {
    int64_t since = op == "ReduceSum" ? 13 : 18;
    auto a = axes_of(c, 1, since);
    if (!a) {
      // Axes unknown: with keepdims the rank stays; otherwise unknown.
      if (keep) {
        std::vector<SymDim> dims;
        for (int64_t i = 0; i < r; ++i) dims.push_back(SymDim::s(c.S.mint()));
        c.set(0, tensor(dt, dims));
      } else {
        c.set(0, tensor_unknown_rank(dt));
      }
      return Status::Ok();
    }
    axes = *a;
    if (axes.empty()) {
      if (c.opset >= since && c.ai("noop_with_empty_axes", 0) != 0) {
        c.set(0, tensor(dt, x.dims));
        return Status::Ok();
      }
      for (int64_t i = 0; i < r; ++i) axes.push_back(i);
    }
  }
  std::vector<bool> red(static_cast<size_t>(r), false);
  for (int64_t a : axes) {
    if (!norm_axis(a, r)) return c.error("axis " + std::to_string(a) + " out of range for " + c.shape_str(x));
    red[static_cast<size_t>(a)] = true;
  }
  std::vector<SymDim> dims;
  for (int64_t i = 0; i < r; ++i) {
    if (!red[static_cast<size_t>(i)]) {
      dims.push_back(x.dims[static_cast<size_t>(i)]);
    } else if (keep) {
      dims.push_back(SymDim::c(1));
    }
  }
  ValueFacts v = tensor(dt, dims);
  if (op == "ReduceProd" && x.has_values && r == 1 && dims.size() <= 1) {
    v.has_values = true;
    v.values = {mul(c.S, x.values)};
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

}  // namespace

void add_reduction_schemas(SchemaList& s) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin"}) {
    s.add(op, &op_reduce);
  }
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax", "CumSum", "CumProd"}) {
    s.add(op, &same_as_input0).rank(kSameAsInput0);
  }
}

}  // namespace nxrt::shape
