// Per-thread scratch without thread_locals: one slot per pool thread in a workspace.
//
// A kernel whose chunks need scratch of their own declares num_threads() slots of it in its variant's
// workspace (SlotScratch::bytes at specialize); compute takes the slots once, before its parallel_for,
// and each chunk uses the slot of the thread running it (ThreadPool::slot(): distinct among the chunks
// running at once, kept by nested inline loops). Concurrent session runs each have their own workspace.
//
//   specialize:  v->slot_bytes = rows * sizeof(float); v->slots = sc.num_threads();
//                workspace_bytes() = SlotScratch::bytes(slot_bytes, slots) (+ whatever else it holds)
//   compute:     NXRT_ASSIGN_OR_RETURN(ep::SlotScratch s, ep::SlotScratch::take(ctx, ws, v->slot_bytes,
//                                                                              v->slots, need));
//                ctx.pool().parallel_for(n, g, [&](int64_t b, int64_t e) { float* row = s.mine<float>(); ... });
//
// When there is no variant (ws null), the variant's slots are too small, or the pool has more threads
// than the variant has slots, take() asks ctx.workspace for pool().num_threads() slots of `need`
// bytes instead: never a shared slot, never an index out of range.
#pragma once
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ep/kernel.h"
#include "ep/thread_pool.h"

namespace nxrt::ep {

class SlotScratch {
 public:
  // Bytes between slots: `bytes_per_slot` rounded up to 64 (each slot starts on a cache line).
  static constexpr size_t stride(size_t bytes_per_slot) { return (bytes_per_slot + 63) / 64 * 64; }
  // Workspace bytes for `slots` slots of `bytes_per_slot`.
  static constexpr size_t bytes(size_t bytes_per_slot, int slots) {
    return stride(bytes_per_slot) * static_cast<size_t>(slots > 0 ? slots : 0);
  }

  // `ws`: a workspace (or a part of one, 64-byte aligned) holding `slots` slots of `bytes_per_slot`
  // bytes, or nullptr. Each thread of ctx.pool() gets `need` bytes. Call on the compute thread, before
  // the parallel_for (ctx.workspace is not for chunks).
  static Result<SlotScratch> take(KernelContext& ctx, void* ws, size_t bytes_per_slot, int slots, size_t need) {
    return take(ctx.pool(), ws, bytes_per_slot, slots, need, [&](size_t b) { return ctx.workspace(b); });
  }
  // No declared workspace: pool().num_threads() slots of `need` bytes from ctx.workspace.
  static Result<SlotScratch> take(KernelContext& ctx, size_t need) { return take(ctx, nullptr, 0, 0, need); }

  // The same for code below the kernel (engines that get a workspace and a pool): `fallback(bytes)`
  // gives memory (Result<void*>) when `ws` does not serve.
  template <typename F>
  static Result<SlotScratch> take(const ThreadPool& pool, void* ws, size_t bytes_per_slot, int slots, size_t need,
                                  F&& fallback) {
    SlotScratch s;
    s.pool_ = &pool;
    if (need == 0) return s;
    const int threads = pool.num_threads();
    if (ws && bytes_per_slot >= need && slots >= threads) {
      s.base_ = static_cast<char*>(ws);
      s.stride_ = stride(bytes_per_slot);
      s.slots_ = slots;
      return s;
    }
    Result<void*> p = fallback(bytes(need, threads));
    if (!p.ok()) return p.status();
    s.base_ = static_cast<char*>(*p);
    s.stride_ = stride(need);
    s.slots_ = threads;
    return s;
  }

  // The calling thread's slot (nullptr when `need` was 0).
  void* mine() const {
    if (!base_) return nullptr;
    const int slot = pool_->slot();
    assert(slot >= 0 && slot < slots_);
    return base_ + static_cast<size_t>(slot) * stride_;
  }
  template <typename T>
  T* mine() const {
    return static_cast<T*>(mine());
  }
  int slots() const { return slots_; }

 private:
  const ThreadPool* pool_ = nullptr;
  char* base_ = nullptr;
  size_t stride_ = 0;
  int slots_ = 0;
};

// Scratch for a plan run without the workspace its kernel declares (the one-call entry points of tests
// and benchmarks, a context without a variant, a pool wider than the plan's slots): `bytes` of
// uninitialized heap, 64-byte aligned (never null, 0 bytes included), freed with the object.
class HeapScratch {
 public:
  explicit HeapScratch(size_t bytes) : buf_(std::make_unique_for_overwrite<unsigned char[]>(bytes + 64)) {}
  void* get() const {
    const auto p = reinterpret_cast<uintptr_t>(buf_.get());
    return reinterpret_cast<void*>((p + 63) & ~uintptr_t(63));
  }

 private:
  std::unique_ptr<unsigned char[]> buf_;
};

// Runs run(plan, workspace) on scratch that serves the plan: `workspace` when given and the pool has no
// more threads than the plan has slots; else a copy of the plan with a slot per pool thread (or the plan
// itself, when only the workspace is missing) on heap scratch of its own. `Plan` has `slots` and
// workspace_bytes() (WinogradPlan, NBitsFastPlan, NBitsPanelsPlan).
template <typename Plan, typename Run>
void run_on_plan_workspace(const Plan& plan, const ep::ThreadPool* pool, void* workspace, Run&& run) {
  const int threads = pool ? pool->num_threads() : 1;
  if (threads > plan.slots) {  // no two threads may share a slot
    Plan wide = plan;
    wide.slots = threads;
    const ep::HeapScratch own(wide.workspace_bytes());
    return run(wide, own.get());
  }
  if (!workspace) {
    const ep::HeapScratch own(plan.workspace_bytes());
    return run(plan, own.get());
  }
  run(plan, workspace);
}

// A variant whose only state is per-thread scratch: `slots` slots of `slot_bytes` (the workspace).
struct SlotVariant : KernelVariant {
  SlotVariant(size_t slot_bytes_, int slots_) : slot_bytes(slot_bytes_), slots(slots_) {}
  size_t workspace_bytes() const override { return SlotScratch::bytes(slot_bytes, slots); }
  const size_t slot_bytes;
  const int slots;
};

// The slots for `need` bytes per thread: the context's SlotVariant's workspace when it is one and
// serves, else ctx.workspace (see SlotScratch::take).
inline Result<SlotScratch> take_slots(KernelContext& ctx, size_t need) {
  if (const auto* v = dynamic_cast<const SlotVariant*>(ctx.variant())) {
    Result<void*> ws = variant_workspace(ctx, *v);
    if (!ws.ok()) return ws.status();
    return SlotScratch::take(ctx, *ws, v->slot_bytes, v->slots, need);
  }
  return SlotScratch::take(ctx, need);
}

// A function kernel (like KernelRegistry::add_fn: compute reads attributes through ctx.info()) whose
// chunks need per-thread scratch: specialize declares slot_bytes(sc) bytes per slot for
// sc.num_threads() slots as a SlotVariant (0: no variant); compute takes them with take_slots.
class SlotFnKernel final : public Kernel {
 public:
  using SlotBytesFn = size_t (*)(const SpecializeContext&);
  SlotFnKernel(ComputeFn fn, SlotBytesFn slot_bytes) : fn_(fn), slot_bytes_(slot_bytes) {}
  Status compute(KernelContext& ctx) const override { return fn_(ctx); }
  Result<std::unique_ptr<KernelVariant>> specialize(const SpecializeContext& sc) const override {
    const size_t b = slot_bytes_(sc);
    if (b == 0) return std::unique_ptr<KernelVariant>();
    return std::unique_ptr<KernelVariant>(std::make_unique<SlotVariant>(b, sc.num_threads()));
  }

 private:
  ComputeFn fn_;
  SlotBytesFn slot_bytes_;
};

// Registers a SlotFnKernel for (domain, op) over opsets [since, end].
inline void add_slot_fn(KernelRegistry& r, const std::string& domain, const std::string& op_type, int64_t since,
                        int64_t end, ComputeFn fn, SlotFnKernel::SlotBytesFn slot_bytes) {
  r.add(KernelDef{domain, op_type, since, end, [fn, slot_bytes](const KernelInfo&) -> Result<std::unique_ptr<Kernel>> {
                    return std::unique_ptr<Kernel>(std::make_unique<SlotFnKernel>(fn, slot_bytes));
                  }});
}

}  // namespace nxrt::ep
