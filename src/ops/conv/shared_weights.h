// A conv's extra weight copy made on first use and shared while used (Winograd's transformed weights,
// the small-spatial path's transposed ones): the first plan that takes the path makes it, later plans
// of any shape share it, and it goes with the last plan holding it (evicted variants free it).
#pragma once
#include <memory>
#include <mutex>

namespace nxrt::ops {

template <typename T>
class SharedLazyWeights {
 public:
  // The live copy, or make() -> std::shared_ptr<T> when none is. Thread-safe.
  template <typename Make>
  std::shared_ptr<const T> acquire(Make&& make) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto live = weak_.lock()) return live;
    std::shared_ptr<const T> made = make();
    weak_ = made;
    return made;
  }

 private:
  mutable std::mutex mu_;
  mutable std::weak_ptr<const T> weak_;
};

}  // namespace nxrt::ops
