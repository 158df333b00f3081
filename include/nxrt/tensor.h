// Tensor and Value: what flows between kernels and what the caller feeds and fetches.
//
// A Tensor is {storage, dtype, shape, strides, byte offset}. Storage is shared, so views (Reshape,
// Slice, Transpose, ...) are Tensors over another tensor's storage, and initializers can point into the
// mmapped model file without a copy. Strings are held as std::string elements in their own storage.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nxrt/dims.h"
#include "nxrt/dtype.h"
#include "nxrt/status.h"

namespace nxrt {

// Dims (include/nxrt/dims.h): shape or strides, inline up to 8 dims.

int64_t shape_numel(const Dims& shape);         // product of dims (1 for a scalar)
std::string shape_to_string(const Dims& shape);  // "[2,3,4]"
Dims contiguous_strides(const Dims& shape);     // row-major strides in elements

// A block of memory that tensors share. Either owned bytes (64-byte aligned), borrowed bytes kept alive
// by `keepalive` (an mmapped file, a caller buffer), or a vector of strings.
// Storage blocks allocated by this process since the last reset (a diagnostic: tests use it to prove
// a steady-state run allocates nothing). `reset` zeroes the counter and returns the old value.
uint64_t storage_allocation_count(bool reset = false);

class Storage {
 public:
  static std::shared_ptr<Storage> allocate(size_t bytes);  // zero-filled

  // While one of these lives on a thread, Storage::allocate on that thread serves blocks of 4 MB and more
  // from fresh anonymous mappings, which the kernel hands out zeroed (no memset pass). Meant for
  // long-lived data made while a session is created (the weights constant folding produces); blocks
  // allocated and freed again run after run keep using malloc, whose heap reuse spares them page faults.
  class LongLivedScope {
   public:
    LongLivedScope();
    ~LongLivedScope();
    LongLivedScope(const LongLivedScope&) = delete;
    LongLivedScope& operator=(const LongLivedScope&) = delete;
  };
  static std::shared_ptr<Storage> borrow(void* data, size_t bytes, std::shared_ptr<void> keepalive);
  static std::shared_ptr<Storage> strings(size_t count);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  bool owned() const { return owned_; }
  // Held by a session's buffer pool, which keeps one reference of its own (see session/buffer_pool.h):
  // such a block is referenced by nobody else when use_count() == 2.
  bool pooled() const { return pooled_; }
  void mark_pooled() { pooled_ = true; }
  std::vector<std::string>& string_data() { return strings_; }
  const std::vector<std::string>& string_data() const { return strings_; }
  bool is_strings() const { return is_strings_; }

 private:
  Storage() = default;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool owned_ = false;
  size_t mapped_bytes_ = 0;  // > 0: data_ is an anonymous mapping of this size (LongLivedScope), else malloc
  bool pooled_ = false;
  bool is_strings_ = false;
  std::shared_ptr<void> keepalive_;
  std::vector<std::string> strings_;
};

class Tensor {
 public:
  Tensor() = default;
  // A new contiguous, zero-filled tensor (strings: empty strings).
  Tensor(DataType dtype, Dims shape);
  // A tensor over existing storage. strides empty = contiguous. offset in bytes (elements for strings).
  Tensor(DataType dtype, Dims shape, std::shared_ptr<Storage> storage, int64_t byte_offset = 0,
         Dims strides = {});

  // Borrow caller memory without copying; `keepalive` (may be null) holds it alive.
  static Tensor borrow(DataType dtype, Dims shape, void* data, std::shared_ptr<void> keepalive = nullptr);
  template <typename T>
  static Tensor from_vector(DataType dtype, Dims shape, const std::vector<T>& values);
  static Tensor scalar_int64(int64_t v);
  static Tensor scalar_float(float v);

  bool defined() const { return dtype_ != DataType::kUndefined; }
  DataType dtype() const { return dtype_; }
  const Dims& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[static_cast<size_t>(i < 0 ? i + rank() : i)]; }
  int64_t numel() const { return shape_numel(shape_); }
  // Strides in elements; empty when the tensor is contiguous row-major.
  const Dims& strides() const { return strides_; }
  Dims effective_strides() const { return strides_.empty() ? contiguous_strides(shape_) : strides_; }
  bool is_contiguous() const;
  int64_t byte_offset() const { return offset_; }
  size_t nbytes() const { return dtype_storage_bytes(dtype_, numel()); }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Typed data pointers (to the first element; only meaningful for contiguous tensors unless the
  // caller applies strides itself). Sub-byte dtypes point to the packed bytes.
  void* raw_data();
  const void* raw_data() const;
  template <typename T> T* data() { return static_cast<T*>(raw_data()); }
  template <typename T> const T* data() const { return static_cast<const T*>(raw_data()); }
  std::string* string_data();
  const std::string* string_data() const;

  // Same storage, new shape (must be contiguous and have the same numel).
  Tensor reshaped(Dims shape) const;
  // A contiguous copy (or *this when already contiguous and `force` is false).
  Tensor contiguous(bool force = false) const;
  // Deep copy into new storage.
  Tensor clone() const { return contiguous(true); }

  std::string describe() const;  // "float32[2,3]"

 private:
  DataType dtype_ = DataType::kUndefined;
  Dims shape_;
  Dims strides_;
  int64_t offset_ = 0;
  std::shared_ptr<Storage> storage_;
};

template <typename T>
Tensor Tensor::from_vector(DataType dtype, Dims shape, const std::vector<T>& values) {
  Tensor t(dtype, std::move(shape));
  if (!values.empty() && t.nbytes() >= values.size() * sizeof(T)) {
    std::copy(values.begin(), values.end(), t.data<T>());
  }
  return t;
}

// Copies src's elements into dst: same dtype and shape, either may be strided (a view).
Status copy_tensor_into(const Tensor& src, Tensor& dst);

// Map values (ai.onnx.ml ZipMap/DictVectorizer): keys int64 or string, values float/double/int64/string.
struct MapValue {
  DataType key_type = DataType::kUndefined;
  DataType value_type = DataType::kUndefined;
  std::vector<int64_t> int_keys;
  std::vector<std::string> string_keys;
  Tensor values;  // 1-D, one per key
};

// What a graph value holds at run time: a tensor, a sequence of values, an optional, or a map.
class Value {
 public:
  enum class Kind { kNone, kTensor, kSequence, kOptional, kMap };

  Value() = default;
  Value(Tensor t) : kind_(Kind::kTensor), tensor_(std::move(t)) {}  // NOLINT(implicit)
  static Value sequence(std::vector<Value> items, DataType elem_type = DataType::kUndefined);
  static Value optional_empty();
  static Value optional_of(Value v);
  static Value map(MapValue m);

  Kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == Kind::kTensor; }
  bool is_sequence() const { return kind_ == Kind::kSequence; }
  bool is_optional() const { return kind_ == Kind::kOptional; }
  bool is_map() const { return kind_ == Kind::kMap; }
  bool is_none() const { return kind_ == Kind::kNone; }

  Tensor& tensor() { return tensor_; }
  const Tensor& tensor() const { return tensor_; }
  std::vector<Value>& items() { return items_; }
  const std::vector<Value>& items() const { return items_; }
  // Element dtype of a (possibly empty) sequence of tensors.
  DataType sequence_elem_type() const { return elem_type_; }
  void set_sequence_elem_type(DataType t) { elem_type_ = t; }
  // Optional: has_element() and element() (the held value).
  bool has_element() const { return !items_.empty(); }
  const Value& element() const { return items_.front(); }
  MapValue& map_value() { return *map_; }
  const MapValue& map_value() const { return *map_; }

  std::string describe() const;

 private:
  Kind kind_ = Kind::kNone;
  Tensor tensor_;
  std::vector<Value> items_;  // sequence items, or the optional's single element
  DataType elem_type_ = DataType::kUndefined;
  std::shared_ptr<MapValue> map_;
};

}  // namespace nxrt
