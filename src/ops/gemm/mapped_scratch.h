// Per-thread scratch for the GEMM engine and the Winograd convolution, mapped directly instead of
// taken from malloc: a long-lived malloc block of this size changes glibc's dynamic mmap threshold and
// with it how every later tensor allocation is served (measured: +7K page faults per ResNet-50 run).
#pragma once
#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace nxrt::ops {

// Grows, never shrinks; contents unspecified (zero when first mapped); 64-byte aligned. If mmap fails
// it falls back to a heap vector.
class MappedScratch {
 public:
  MappedScratch() = default;
  MappedScratch(const MappedScratch&) = delete;
  MappedScratch& operator=(const MappedScratch&) = delete;
  ~MappedScratch() {
    if (ptr_) munmap(ptr_, bytes_);
  }
  // At least n floats.
  float* get(size_t n) {
    if (n <= cap_) return ptr_;
    if (ptr_) munmap(ptr_, bytes_);
    ptr_ = nullptr;
    cap_ = bytes_ = 0;
    const size_t want = (n * sizeof(float) + 4095) / 4096 * 4096;
    void* p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      fallback_.assign(n + 16, 0.f);
      return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(fallback_.data()) + 63) & ~uintptr_t(63));
    }
    ptr_ = static_cast<float*>(p);
    bytes_ = want;
    cap_ = want / sizeof(float);
    return ptr_;
  }

 private:
  float* ptr_ = nullptr;
  size_t cap_ = 0;  // floats
  size_t bytes_ = 0;
  std::vector<float> fallback_;
};

}  // namespace nxrt::ops
