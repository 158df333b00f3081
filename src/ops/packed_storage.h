// Storage for weights packed once per kernel (conv and GEMM operands, Winograd-transformed filters,
// MatMulNBits panels): 64-byte aligned, zero-filled, on transparent huge pages.
//
// Why not std::vector: a vector zero-fills what it allocates and glibc serves a large one from a fresh
// 4 KB-page mapping, so packing a model's weights touched every page twice and took one page fault per
// 4 KB. On a VM whose hypervisor shadows the guest's page tables a fault costs microseconds: VGG-19's
// first run (where its Winograd filters are transformed) took 1.3 s against 0.11 s for later runs, and
// memset plus faults were most of it. Fresh anonymous memory is already zero, and on 2 MB pages it
// faults once per 2 MB; a decode step that streams packed weights also takes one TLB miss per 2 MB
// instead of per 4 KB.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nxrt::ops {

struct PackedArenaChunk;

// A 64-byte aligned, zero-filled byte buffer: up to 16 MB out of shared 32 MB chunks of huge pages
// (packed_storage.cpp's PackedArena), larger ones in a 2 MB-aligned mapping of their own; from the heap
// where no mapping can be made, and, with `small_first`, while the process's first 4 MB of such buffers
// last (kSmallFirstBytes, below).
class PackedBytes {
 public:
  PackedBytes() = default;
  explicit PackedBytes(size_t bytes, bool small_first = false);
  // The heap bytes `small_first` buffers may take, process-wide: a model whose packed arrays all fit in
  // them (kws_cnn's 2.1 MB, 458 arrays) would gain nothing from 2 MB pages but back them whole (its peak
  // RSS 18.5 -> 21.4 MB with every array in the arena, 19.3-20.1 this way), and a larger model's first
  // few arrays take few faults anyway.
  static constexpr size_t kSmallFirstBytes = size_t{4} << 20;
  ~PackedBytes();
  PackedBytes(PackedBytes&& o) noexcept;
  PackedBytes& operator=(PackedBytes&& o) noexcept;
  PackedBytes(const PackedBytes&) = delete;
  PackedBytes& operator=(const PackedBytes&) = delete;
  uint8_t* data() { return p_; }
  const uint8_t* data() const { return p_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }

 private:
  void release();
  uint8_t* p_ = nullptr;
  size_t n_ = 0, mapped_ = 0;          // mapped_: the length of a mapping of its own
  PackedArenaChunk* chunk_ = nullptr;  // the arena chunk it is in
};

// n values of T (float, double, int8 ...: a type whose zero is all zero bits) in PackedBytes, all zero
// to begin with, allocated small_first (the heap while the process's kSmallFirstBytes last). MatMulNBits
// panels use PackedBytes directly and take the arena from the start: a decode step streams them all,
// every step.
template <typename T>
class PackedArray {
 public:
  PackedArray() = default;
  explicit PackedArray(size_t n) : bytes_(n * sizeof(T), true) {}
  T* data() { return reinterpret_cast<T*>(bytes_.data()); }
  const T* data() const { return reinterpret_cast<const T*>(bytes_.data()); }
  size_t size() const { return bytes_.size() / sizeof(T); }  // (a moved-from PackedBytes is empty)
  bool empty() const { return bytes_.empty(); }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }

 private:
  PackedBytes bytes_;
};

}  // namespace nxrt::ops
