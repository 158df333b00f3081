// Per-thread scratch without thread_locals: one slot per pool thread.
//
// A kernel whose chunks need scratch of their own takes the slots once in compute, before its
// parallel_for, and each chunk uses the slot of the thread running it (ThreadPool::slot(): distinct
// among the chunks running at once, kept by nested inline loops):
//
//   compute:  NXRT_ASSIGN_OR_RETURN(ep::SlotScratch s, ep::SlotScratch::take(ctx, row_bytes));
//             ctx.pool().parallel_for(n, g, [&](int64_t b, int64_t e) { float* row = s.mine<float>(); ... });
//
// The memory is KernelContext::thread_slots: in a session run, the same per-thread memory for every
// kernel (each run context has its own), so a slot holds lines its thread's core wrote last. Engines
// below the kernels take an ep::SlotMemory their caller got the same way (the conv engine's
// ConvPlan::slot_bytes, Winograd), or run_on_plan_workspace's slots in a workspace.
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

  // `need` bytes for each thread of ctx.pool(): KernelContext::thread_slots (in a session, memory each
  // thread keeps for every kernel). Call on the compute thread, before the parallel_for.
  static Result<SlotScratch> take(KernelContext& ctx, size_t need) {
    SlotScratch s;
    s.pool_ = &ctx.pool();
    if (need == 0) return s;
    Result<SlotMemory> m = ctx.thread_slots(need);
    if (!m.ok()) return m.status();
    return SlotScratch(ctx.pool(), *m);
  }

  SlotScratch() = default;
  // The slots of KernelContext::thread_slots.
  SlotScratch(const ThreadPool& pool, const SlotMemory& m) : pool_(&pool), base_(m.base), stride_(m.stride), slots_(m.slots) {}

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

// Thread slots on heap scratch of their own, for engines called without a context's (the one-call
// entry points of tests and benchmarks): `slots` slots of `bytes_per_slot`, freed with the object.
class HeapSlots {
 public:
  HeapSlots(size_t bytes_per_slot, int slots)
      : stride_(SlotScratch::stride(bytes_per_slot)), slots_(slots), heap_(stride_ * static_cast<size_t>(slots)) {}
  SlotMemory memory() const { return {static_cast<char*>(heap_.get()), stride_, slots_}; }

 private:
  size_t stride_;
  int slots_;
  HeapScratch heap_;
};

// Runs run(plan, workspace) on scratch that serves the plan: `workspace` when given and the pool has no
// more threads than the plan has slots; else a copy of the plan with a slot per pool thread (or the plan
// itself, when only the workspace is missing) on heap scratch of its own. `Plan` has `slots` and
// workspace_bytes() (NBitsFastPlan, NBitsPanelsPlan).
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

}  // namespace nxrt::ep
