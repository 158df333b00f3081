// Einsum (opset 12): any equation with implicit or explicit output, ellipsis broadcasting, repeated
// labels within an operand (diagonals) and summation.
//
// Plan: each operand becomes a tensor with one axis per distinct label (diagonals taken by summing
// strides, size-1 ellipsis dims broadcast by stride 0), labels used nowhere else are summed out, then
// operands are contracted left to right as batched matrix products [batch, M, K] x [batch, K, N]
// (the blocked GEMM for float/double), and the result is summed/permuted into the output order.
#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "ep/thread_pool.h"
#include "ops/common.h"
#include "ops/linalg/linalg_util.h"
#include "ops/reduction/reduction_util.h"

namespace nxrt::ops {

namespace {

constexpr int kEllipsisBase = 52;  // labels 0..51 are letters, 52+ ellipsis dims

int letter_id(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;  // ASCII order: uppercase before lowercase
  if (c >= 'A' && c <= 'Z') return c - 'A';
  return -1;
}

struct Term {
  std::vector<int> letters_before;  // labels before "..."
  std::vector<int> letters_after;   // labels after "..." (all labels when no ellipsis)
  bool ellipsis = false;
};

Result<Term> parse_term(const std::string& s) {
  Term t;
  bool seen = false;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '.') {
      if (s.compare(i, 3, "...") != 0 || seen) return invalid_argument("bad ellipsis in einsum term '" + s + "'");
      seen = true;
      t.ellipsis = true;
      i += 3;
      continue;
    }
    int id = letter_id(s[i]);
    if (id < 0) return invalid_argument(std::string("bad einsum label '") + s[i] + "'");
    (seen ? t.letters_after : t.letters_before).push_back(id);
    ++i;
  }
  if (!seen) {
    t.letters_after = std::move(t.letters_before);
    t.letters_before.clear();
  }
  return t;
}

// A tensor with one axis per label.
template <typename T>
struct LT {
  Tensor t;  // contiguous
  std::vector<int> labels;
};

// Contiguous copy of `src` with its axes reordered to `order` (a permutation of src.labels).
template <typename T>
LT<T> permute(const LT<T>& src, const std::vector<int>& order) {
  if (order == src.labels) return src;
  Dims shape, strides;
  const Dims st = contiguous_strides(src.t.shape());
  for (int l : order) {
    size_t p = std::find(src.labels.begin(), src.labels.end(), l) - src.labels.begin();
    shape.push_back(src.t.shape()[p]);
    strides.push_back(st[p]);
  }
  Tensor view(src.t.dtype(), shape, src.t.storage(), src.t.byte_offset(), strides);
  return LT<T>{view.contiguous(true), order};
}

// Sums out every label not in `keep`.
template <typename T>
LT<T> sum_out(const LT<T>& src, const std::vector<int>& keep_set) {
  std::vector<int> kept, gone;
  for (int l : src.labels) {
    (std::find(keep_set.begin(), keep_set.end(), l) != keep_set.end() ? kept : gone).push_back(l);
  }
  if (gone.empty()) return src;
  std::vector<int> order = kept;
  order.insert(order.end(), gone.begin(), gone.end());
  LT<T> p = permute(src, order);
  Dims out_shape(p.t.shape().begin(), p.t.shape().begin() + kept.size());
  const int64_t O = shape_numel(out_shape);
  const int64_t R = O == 0 ? 0 : (p.t.numel() / std::max<int64_t>(O, 1));
  Tensor out(src.t.dtype(), out_shape);
  const T* x = p.t.template data<T>();
  T* y = out.template data<T>();
  using U = std::conditional_t<std::is_integral_v<T>, std::make_unsigned_t<std::conditional_t<std::is_integral_v<T>, T, int>>, T>;
  for (int64_t o = 0; o < O; ++o) {
    U s = U(0);
    for (int64_t r = 0; r < R; ++r) s += static_cast<U>(x[o * R + r]);
    y[o] = static_cast<T>(s);
  }
  return LT<T>{out, kept};
}

// How one contraction runs, from the operands' labels alone (their sizes are the plan's): labels only in
// one operand and not kept are summed out first (x_keep / y_keep: what each keeps), then the operands
// are permuted to [batch, m, k] (xo) and [batch, k, n] (yo) and multiplied as a batched product `s`,
// giving out_labels = batch, m, n.
struct Contraction {
  std::vector<int> x_keep, y_keep, xo, yo, out_labels;
  MatMulShape s;
};

Contraction contraction(const std::vector<int>& x0_labels, const std::vector<int>& y0_labels,
                        const std::vector<int>& keep_set, const std::vector<int64_t>& size_of) {
  auto has = [](const std::vector<int>& v, int l) { return std::find(v.begin(), v.end(), l) != v.end(); };
  Contraction c;
  c.x_keep = keep_set;
  c.y_keep = keep_set;
  c.x_keep.insert(c.x_keep.end(), y0_labels.begin(), y0_labels.end());
  c.y_keep.insert(c.y_keep.end(), x0_labels.begin(), x0_labels.end());
  std::vector<int> x_labels, y_labels;  // after sum_out, which keeps the order
  for (int l : x0_labels)
    if (has(c.x_keep, l)) x_labels.push_back(l);
  for (int l : y0_labels)
    if (has(c.y_keep, l)) y_labels.push_back(l);
  std::vector<int> batch, m, k, n;
  for (int l : x_labels) {
    if (has(y_labels, l)) (has(keep_set, l) ? batch : k).push_back(l);
    else m.push_back(l);
  }
  for (int l : y_labels)
    if (!has(x_labels, l)) n.push_back(l);
  c.xo = batch;
  c.yo = batch;
  c.xo.insert(c.xo.end(), m.begin(), m.end());
  c.xo.insert(c.xo.end(), k.begin(), k.end());
  c.yo.insert(c.yo.end(), k.begin(), k.end());
  c.yo.insert(c.yo.end(), n.begin(), n.end());
  auto prod = [&](const std::vector<int>& ls) {
    int64_t p = 1;
    for (int l : ls) p *= size_of[l];
    return p;
  };
  MatMulShape& s = c.s;
  const int64_t nb = prod(batch);
  s.M = prod(m);
  s.K = prod(k);
  s.N = prod(n);
  s.batch = {nb};
  s.a_batch_strides = {1};
  s.b_batch_strides = {1};
  s.a_batches = s.b_batches = nb;
  c.out_labels = batch;
  c.out_labels.insert(c.out_labels.end(), m.begin(), m.end());
  c.out_labels.insert(c.out_labels.end(), n.begin(), n.end());
  return c;
}

// Contracts x0 with y0 as `c` says, the batched product on the plan `mp` (and the float GEMM's packing
// scratch `gs`, when given).
template <typename T>
LT<T> contract(const LT<T>& x0, const LT<T>& y0, const Contraction& c, const std::vector<int64_t>& size_of,
               const MatMulPlan& mp, const GemmScratch* gs, ep::ThreadPool& pool) {
  LT<T> x = sum_out(x0, c.x_keep), y = sum_out(y0, c.y_keep);
  LT<T> xp = permute(x, c.xo), yp = permute(y, c.yo);
  Dims out_shape;
  for (int l : c.out_labels) out_shape.push_back(size_of[l]);
  Tensor out(x.t.dtype(), out_shape);
  if (out.numel() > 0 && c.s.K > 0) {
    matmul_batched<T>(xp.t.template data<T>(), yp.t.template data<T>(), out.template data<T>(), c.s, pool,
                      ep::cpu_isa_tier(), gs, &mp);
  }
  return LT<T>{out, c.out_labels};
}

struct Plan {
  std::vector<std::vector<int>> op_labels;  // per operand, per axis
  std::vector<int> out_labels;
  std::vector<int64_t> size_of;
  // Operand i's distinct labels in order of first appearance (its axes after diagonals are taken), the
  // labels kept when operand 0 is reduced alone, and contraction i - 1 with its batched product's plan
  // (the float GEMM's blocking for these shapes), for operands 1..n-1 in turn.
  std::vector<std::vector<int>> uniq_labels;
  std::vector<int> keep_first;
  std::vector<Contraction> contractions;
  std::vector<MatMulPlan> matmuls;
  size_t gemm_slot_floats = 0;  // the most packing scratch any of the products' GEMMs needs per slot
};

// Labels needed after operand i: output labels plus every label of operands > i.
std::vector<int> needed_after(const Plan& p, size_t i) {
  std::vector<int> keep = p.out_labels;
  for (size_t j = i + 1; j < p.uniq_labels.size(); ++j) {
    keep.insert(keep.end(), p.uniq_labels[j].begin(), p.uniq_labels[j].end());
  }
  return keep;
}

// Fills the plan's contraction sequence, each product planned for a pool of `threads` threads.
void plan_contractions(Plan* p, int threads) {
  p->uniq_labels.clear();
  for (const std::vector<int>& labels : p->op_labels) {
    std::vector<int> uniq;
    for (int l : labels)
      if (std::find(uniq.begin(), uniq.end(), l) == uniq.end()) uniq.push_back(l);
    p->uniq_labels.push_back(std::move(uniq));
  }
  p->keep_first = needed_after(*p, 0);
  std::vector<int> cur;
  for (int l : p->uniq_labels[0])
    if (std::find(p->keep_first.begin(), p->keep_first.end(), l) != p->keep_first.end()) cur.push_back(l);
  p->contractions.clear();
  p->matmuls.clear();
  p->gemm_slot_floats = 0;
  for (size_t i = 1; i < p->uniq_labels.size(); ++i) {
    Contraction c = contraction(cur, p->uniq_labels[i], needed_after(*p, i), p->size_of);
    p->matmuls.push_back(matmul_plan(c.s, std::max(1, threads)));
    p->gemm_slot_floats = std::max(p->gemm_slot_floats, p->matmuls.back().gemm.scratch_floats);
    cur = c.out_labels;
    p->contractions.push_back(std::move(c));
  }
}

Result<Plan> make_plan(const std::string& eq0, const std::vector<const Dims*>& ins) {
  std::string eq;
  for (char c : eq0)
    if (c != ' ') eq.push_back(c);
  Plan p;
  p.size_of.assign(128, -1);
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  size_t start = 0;
  for (;;) {
    size_t c = lhs.find(',', start);
    terms.push_back(lhs.substr(start, c == std::string::npos ? std::string::npos : c - start));
    if (c == std::string::npos) break;
    start = c + 1;
  }
  if (terms.size() != ins.size()) {
    return invalid_argument("einsum equation '" + eq0 + "' has " + std::to_string(terms.size()) + " operands, got " +
                            std::to_string(ins.size()) + " inputs");
  }
  int ell_rank = 0;
  std::vector<Term> parsed;
  for (size_t i = 0; i < terms.size(); ++i) {
    NXRT_ASSIGN_OR_RETURN(Term t, parse_term(terms[i]));
    const int64_t nl = static_cast<int64_t>(t.letters_before.size() + t.letters_after.size());
    const int64_t rank = static_cast<int64_t>(ins[i]->size());
    if ((!t.ellipsis && nl != rank) || (t.ellipsis && nl > rank)) {
      return invalid_argument("einsum term '" + terms[i] + "' does not match input of shape " + shape_to_string(*ins[i]));
    }
    if (t.ellipsis) ell_rank = std::max<int>(ell_rank, static_cast<int>(rank - nl));
    if (ell_rank > 64) return invalid_argument("einsum ellipsis covers too many dimensions");
    parsed.push_back(std::move(t));
  }
  std::array<int, 128> count{};
  for (size_t i = 0; i < parsed.size(); ++i) {
    const Term& t = parsed[i];
    std::vector<int> labels = t.letters_before;
    if (t.ellipsis) {
      const int e = static_cast<int>(ins[i]->size() - t.letters_before.size() - t.letters_after.size());
      for (int j = 0; j < e; ++j) labels.push_back(kEllipsisBase + ell_rank - e + j);
    }
    labels.insert(labels.end(), t.letters_after.begin(), t.letters_after.end());
    for (size_t a = 0; a < labels.size(); ++a) {
      const int l = labels[a];
      const int64_t d = (*ins[i])[a];
      ++count[l];
      if (p.size_of[l] < 0 || p.size_of[l] == 1) {
        p.size_of[l] = d;
      } else if (d != 1 && d != p.size_of[l]) {
        return invalid_argument("einsum label sizes differ (" + std::to_string(d) + " vs " +
                                std::to_string(p.size_of[l]) + ") in '" + eq0 + "'");
      }
    }
    p.op_labels.push_back(std::move(labels));
  }
  if (arrow != std::string::npos) {
    NXRT_ASSIGN_OR_RETURN(Term t, parse_term(eq.substr(arrow + 2)));
    p.out_labels = t.letters_before;
    if (t.ellipsis) {
      for (int j = 0; j < ell_rank; ++j) p.out_labels.push_back(kEllipsisBase + j);
    } else if (ell_rank > 0) {
      // numpy requires "..." in an explicit output when inputs broadcast; the ellipsis dims are summed.
    }
    p.out_labels.insert(p.out_labels.end(), t.letters_after.begin(), t.letters_after.end());
    std::array<int, 128> seen{};
    for (int l : p.out_labels) {
      if (l < kEllipsisBase && count[l] == 0) return invalid_argument("einsum output label not in inputs: '" + eq0 + "'");
      if (seen[l]++) return invalid_argument("einsum output repeats a label: '" + eq0 + "'");
    }
  } else {
    for (int j = 0; j < ell_rank; ++j) p.out_labels.push_back(kEllipsisBase + j);
    for (int l = 0; l < kEllipsisBase; ++l)
      if (count[l] == 1) p.out_labels.push_back(l);
  }
  return p;
}

template <typename T>
Status einsum_typed(ep::KernelContext& ctx, const Plan& plan, const std::vector<Tensor>& ins, Tensor* y,
                    const GemmScratch* gs) {
  // Operands with distinct labels (diagonals and broadcasting as strided views).
  std::vector<LT<T>> ops;
  for (size_t i = 0; i < ins.size(); ++i) {
    const auto& labels = plan.op_labels[i];
    const Dims st = contiguous_strides(ins[i].shape());
    std::vector<int> uniq;
    Dims shape, strides;
    for (size_t a = 0; a < labels.size(); ++a) {
      const int64_t s = ins[i].shape()[a] == 1 ? 0 : st[a];
      auto it = std::find(uniq.begin(), uniq.end(), labels[a]);
      if (it == uniq.end()) {
        uniq.push_back(labels[a]);
        shape.push_back(plan.size_of[labels[a]]);
        strides.push_back(s);
      } else {
        strides[it - uniq.begin()] += s;
      }
    }
    Tensor view(ins[i].dtype(), shape, ins[i].storage(), ins[i].byte_offset(), strides);
    ops.push_back(LT<T>{view.contiguous(true), uniq});
  }
  LT<T> cur = sum_out(ops[0], plan.keep_first);
  for (size_t i = 1; i < ops.size(); ++i) {
    cur = contract(cur, ops[i], plan.contractions[i - 1], plan.size_of, plan.matmuls[i - 1], gs, ctx.pool());
  }
  cur = sum_out(cur, plan.out_labels);
  // Output labels absent from cur (cannot happen for valid equations) would be size 1.
  LT<T> fin = permute(cur, plan.out_labels);
  std::copy_n(fin.t.template data<T>(), fin.t.numel(), y->template data<T>());
  return Status::Ok();
}

// The einsum plan (labels per operand, output labels, label sizes) is shape-dependent state: built
// once per set of input shapes by specialize and kept in the kernel cache.
// Its workspace is the float GEMM's packing scratch: a slot per pool thread.
struct EinsumVariant final : ep::KernelVariant {
  size_t workspace_bytes() const override { return gemm_slots * plan.gemm_slot_floats * sizeof(float); }
  Plan plan;
  int gemm_slots = 0;
};

class EinsumKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    equation_ = info.attr_string("equation");
    return Status::Ok();
  }

  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    std::vector<const Dims*> shapes;
    for (size_t i = 0; i < sc.num_inputs(); ++i) {
      if (!sc.has_input(i)) return std::unique_ptr<ep::KernelVariant>();  // compute names the problem
      shapes.push_back(&sc.shape(i));
    }
    auto plan = make_plan(equation_, shapes);
    if (!plan.ok()) return std::unique_ptr<ep::KernelVariant>();  // compute reports it with the inputs
    auto v = std::make_unique<EinsumVariant>();
    v->plan = std::move(plan).value();
    plan_contractions(&v->plan, sc.num_threads());
    const DataType dt = sc.dtype(0);
    if (dt == DataType::kFloat || dt == DataType::kFloat16 || dt == DataType::kBFloat16) {
      v->gemm_slots = std::max(1, sc.num_threads());
    }
    return std::unique_ptr<ep::KernelVariant>(std::move(v));
  }

  Status compute(ep::KernelContext& ctx) const override {
    std::vector<const Tensor*> ins;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (!ctx.has_input(i)) return ctx.error("missing input " + std::to_string(i));
      ins.push_back(&ctx.input(i));
    }
    if (ins.empty()) return ctx.error("Einsum needs at least one input");
    for (const Tensor* t : ins) {
      if (t->dtype() != ins[0]->dtype()) return ctx.error("Einsum inputs differ in dtype", StatusCode::kInvalidArgument);
    }
    // The cached plan; contexts without a kernel cache (constant folding) plan per call.
    Plan local;
    const auto* cached = dynamic_cast<const EinsumVariant*>(ctx.variant());
    if (!cached) {
      std::vector<const Dims*> shapes;
      for (const Tensor* t : ins) shapes.push_back(&t->shape());
      auto pr = make_plan(equation_, shapes);
      if (!pr.ok()) return ctx.error(pr.status().message(), StatusCode::kInvalidArgument);
      local = std::move(pr).value();
      plan_contractions(&local, ctx.pool().num_threads());
    }
    const Plan& plan = cached ? cached->plan : local;
    GemmScratch gs;
    if (cached && cached->workspace_bytes() > 0) {
      NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, *cached));
      gs = {static_cast<float*>(ws), plan.gemm_slot_floats, cached->gemm_slots};
    }
    Dims out_shape;
    for (int l : plan.out_labels) out_shape.push_back(plan.size_of[l] < 0 ? 1 : plan.size_of[l]);
    const DataType dt = ins[0]->dtype();
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, out_shape));
    if (dt == DataType::kFloat16 || dt == DataType::kBFloat16) {
      std::vector<Tensor> fins;
      for (const Tensor* t : ins) {
        Tensor f(DataType::kFloat, t->shape());
        NXRT_RETURN_IF_ERROR(load_floats(dt, t->raw_data(), t->numel(), f.data<float>()));
        fins.push_back(f);
      }
      Tensor fy(DataType::kFloat, out_shape);
      NXRT_RETURN_IF_ERROR(einsum_typed<float>(ctx, plan, fins, &fy, &gs));
      return store_floats(fy.data<float>(), fy.numel(), dt, y->raw_data());
    }
    std::vector<Tensor> tins;
    for (const Tensor* t : ins) tins.push_back(*t);
    return dispatch_numeric(
        dt,
        [&](auto tag) -> Status {
          using T = decltype(tag);
          if constexpr (is_reduced_float_v<T>) {
            return Status::Ok();
          } else {
            return einsum_typed<T>(ctx, plan, tins, y, &gs);
          }
        },
        [&] { return ctx.error(std::string("unsupported dtype ") + dtype_name(dt), StatusCode::kNotImplemented); });
  }

 private:
  std::string equation_;
};

}  // namespace

void register_einsum_ops(ep::KernelRegistry& r) { r.add_class<EinsumKernel>("", "Einsum"); }

}  // namespace nxrt::ops
