// Dims: a tensor shape (or strides), stored inline up to kInline dimensions.
//
// Shapes are built, copied and compared on every kernel call; with std::vector each of those was a
// heap allocation, which made an allocation-free steady-state run impossible. Dims keeps up to eight
// dimensions inside the object (every tensor ONNX models use in practice) and spills to the heap only
// beyond that. The interface is the subset of std::vector<int64_t> the code base uses, plus implicit
// conversions to and from std::vector<int64_t> for attribute lists and tests.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <type_traits>
#include <vector>

namespace nxrt {

class Dims {
 public:
  static constexpr size_t kInline = 8;
  using value_type = int64_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  Dims() = default;
  explicit Dims(size_t n, int64_t v = 0) { assign(n, v); }
  Dims(std::initializer_list<int64_t> il) { assign(il.begin(), il.end()); }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  Dims(It first, It last) {
    assign(first, last);
  }
  Dims(const std::vector<int64_t>& v) { assign(v.begin(), v.end()); }  // NOLINT(implicit)
  Dims(const Dims& o) { assign(o.begin(), o.end()); }
  Dims(Dims&& o) noexcept { take(o); }
  ~Dims() { release(); }

  Dims& operator=(const Dims& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  Dims& operator=(Dims&& o) noexcept {
    if (this != &o) {
      // Keep our own heap block when the other one is inline: moving a short shape into a Dims that
      // already spilled must not free and reallocate.
      if (o.heap_ == nullptr) {
        assign(o.begin(), o.end());
        o.size_ = 0;
      } else {
        release();
        take(o);
      }
    }
    return *this;
  }
  Dims& operator=(std::initializer_list<int64_t> il) {
    assign(il.begin(), il.end());
    return *this;
  }
  Dims& operator=(const std::vector<int64_t>& v) {
    assign(v.begin(), v.end());
    return *this;
  }

  operator std::vector<int64_t>() const { return std::vector<int64_t>(begin(), end()); }  // NOLINT
  std::vector<int64_t> to_vector() const { return std::vector<int64_t>(begin(), end()); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  size_t capacity() const { return heap_ ? cap_ : kInline; }
  int64_t* data() { return heap_ ? heap_ : inline_; }
  const int64_t* data() const { return heap_ ? heap_ : inline_; }

  int64_t& operator[](size_t i) { return data()[i]; }
  const int64_t& operator[](size_t i) const { return data()[i]; }
  int64_t& front() { return data()[0]; }
  const int64_t& front() const { return data()[0]; }
  int64_t& back() { return data()[size_ - 1]; }
  const int64_t& back() const { return data()[size_ - 1]; }

  iterator begin() { return data(); }
  iterator end() { return data() + size_; }
  const_iterator begin() const { return data(); }
  const_iterator end() const { return data() + size_; }
  const_iterator cbegin() const { return begin(); }
  const_iterator cend() const { return end(); }
  reverse_iterator rbegin() { return reverse_iterator(end()); }
  reverse_iterator rend() { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const { return const_reverse_iterator(begin()); }

  void reserve(size_t n) {
    if (n <= capacity()) return;
    auto* p = new int64_t[n];
    if (size_) std::memcpy(p, data(), size_ * sizeof(int64_t));
    delete[] heap_;
    heap_ = p;
    cap_ = n;
  }
  void clear() { size_ = 0; }
  void resize(size_t n, int64_t v = 0) {
    reserve(n);
    for (size_t i = size_; i < n; ++i) data()[i] = v;
    size_ = n;
  }
  void assign(size_t n, int64_t v) {
    size_ = 0;
    resize(n, v);
  }
  template <typename It>
  void assign(It first, It last) {
    const auto n = static_cast<size_t>(std::distance(first, last));
    if (n > capacity()) {
      // `first` may point into our own storage only when n <= size_, so this is safe.
      size_ = 0;
      reserve(n);
    }
    int64_t* d = data();
    size_t i = 0;
    for (It it = first; it != last; ++it) d[i++] = static_cast<int64_t>(*it);
    size_ = n;
  }
  void push_back(int64_t v) {
    if (size_ == capacity()) reserve(capacity() * 2);
    data()[size_++] = v;
  }
  int64_t& emplace_back(int64_t v) {
    push_back(v);
    return back();
  }
  void pop_back() { --size_; }

  iterator insert(const_iterator pos, int64_t v) { return insert(pos, size_t{1}, v); }
  iterator insert(const_iterator pos, size_t n, int64_t v) {
    size_t at = static_cast<size_t>(pos - begin());
    grow_gap(at, n);
    std::fill(begin() + at, begin() + at + n, v);
    return begin() + at;
  }
  template <typename It, typename = std::enable_if_t<!std::is_integral_v<It>>>
  iterator insert(const_iterator pos, It first, It last) {
    size_t at = static_cast<size_t>(pos - begin());
    size_t n = static_cast<size_t>(std::distance(first, last));
    // Copy first: the range may alias our own storage.
    int64_t tmp_inline[kInline];
    std::unique_ptr<int64_t[]> tmp_heap;
    int64_t* tmp = tmp_inline;
    if (n > kInline) {
      tmp_heap.reset(new int64_t[n]);
      tmp = tmp_heap.get();
    }
    size_t i = 0;
    for (It it = first; it != last; ++it) tmp[i++] = static_cast<int64_t>(*it);
    grow_gap(at, n);
    std::copy(tmp, tmp + n, begin() + at);
    return begin() + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<int64_t> il) { return insert(pos, il.begin(), il.end()); }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    size_t a = static_cast<size_t>(first - begin());
    size_t b = static_cast<size_t>(last - begin());
    std::copy(begin() + b, end(), begin() + a);
    size_ -= (b - a);
    return begin() + a;
  }
  void swap(Dims& o) noexcept {
    Dims t(std::move(o));
    o = std::move(*this);
    *this = std::move(t);
  }

  friend bool operator==(const Dims& a, const Dims& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator!=(const Dims& a, const Dims& b) { return !(a == b); }
  friend bool operator<(const Dims& a, const Dims& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  }
  friend bool operator==(const Dims& a, const std::vector<int64_t>& b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
  }
  friend bool operator==(const std::vector<int64_t>& b, const Dims& a) { return a == b; }
  friend bool operator!=(const Dims& a, const std::vector<int64_t>& b) { return !(a == b); }
  friend bool operator!=(const std::vector<int64_t>& b, const Dims& a) { return !(a == b); }

 private:
  void release() {
    delete[] heap_;
    heap_ = nullptr;
    cap_ = 0;
  }
  void take(Dims& o) {
    size_ = o.size_;
    if (o.heap_) {
      heap_ = o.heap_;
      cap_ = o.cap_;
      o.heap_ = nullptr;
      o.cap_ = 0;
    } else {
      std::memcpy(inline_, o.inline_, size_ * sizeof(int64_t));
    }
    o.size_ = 0;
  }
  // Opens n slots at index `at`.
  void grow_gap(size_t at, size_t n) {
    if (size_ + n > capacity()) reserve(std::max(size_ + n, capacity() * 2));
    int64_t* d = data();
    std::copy_backward(d + at, d + size_, d + size_ + n);
    size_ += n;
  }

  int64_t inline_[kInline] = {};
  int64_t* heap_ = nullptr;
  size_t cap_ = 0;
  size_t size_ = 0;
};

}  // namespace nxrt
