#include "nxrt/tensor.h"

#include "ir/alloc_faults.h"
#include "ir/allocation.h"
#include "ir/page_mapping.h"
#include "ir/byte_transpose.h"
#include "ir/strided_cursor.h"

#include <atomic>
#include <cstdint>
#include <type_traits>
#include <cstdlib>
#include <cstring>

#include <sys/mman.h>
#include <new>
#include <sstream>

namespace nxrt {

int64_t shape_numel(const Dims& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_to_string(const Dims& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

bool shape_storage_bytes(DataType dtype, const Dims& shape, size_t* bytes) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
  }
  const uint64_t bits = dtype == DataType::kString ? 8 * sizeof(std::string) : static_cast<uint64_t>(dtype_bits(dtype));
  uint64_t total_bits = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(n), bits, &total_bits) || total_bits / 8 > PTRDIFF_MAX) return false;
  *bytes = static_cast<size_t>((total_bits + 7) / 8);
  return true;
}

Dims contiguous_strides(const Dims& shape) {
  Dims st(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    // Only an empty shape (a 0 dim further left) can overflow here, e.g. [0, 2^40, 2^40]: its strides
    // address no element, so a saturated value serves (fuzzing found the overflow, docs/RELIABILITY.md).
    if (i > 0 && __builtin_mul_overflow(acc, shape[i], &acc)) acc = INT64_MAX;
  }
  return st;
}

// ---------------------------------------------------------------------------------------------
// Storage

namespace {
std::atomic<uint64_t> g_storage_allocations{0};
}  // namespace

uint64_t storage_allocation_count(bool reset) {
  return reset ? g_storage_allocations.exchange(0) : g_storage_allocations.load();
}

// ---- fault injection (ir/alloc_faults.h) ----

namespace {
// > 0: the allocation that brings it to 0 fails. Read on every allocation, so off costs one relaxed
// load and a branch that is never taken.
std::atomic<int64_t> g_fault_countdown{0};
std::atomic<bool> g_fault_fired{false};

void maybe_inject_fault(size_t bytes) {
  if (g_fault_countdown.load(std::memory_order_relaxed) <= 0) return;
  if (g_fault_countdown.fetch_sub(1, std::memory_order_relaxed) != 1) return;
  g_fault_fired.store(true, std::memory_order_relaxed);
  throw AllocationError("injected allocation failure (a test) of " + std::to_string(bytes) + " bytes");
}
}  // namespace

namespace fault_injection {
void inject_allocation_failure(uint64_t n) {
  g_fault_fired.store(false);
  g_fault_countdown.store(static_cast<int64_t>(n));
}
bool injected_allocation_failure_fired() { return g_fault_fired.load(); }
}  // namespace fault_injection

namespace {
constexpr size_t kMappedBlock = size_t(4) << 20;
thread_local int tl_long_lived = 0;  // LongLivedScope depth on this thread

// A zeroed anonymous mapping for `bytes`; *mapped gets its length. nullptr on failure. On transparent
// huge pages (rounded up to 2 MB) when the kernel has free 2 MB blocks for it, else on 4 KB pages (rounded
// up to 4 KiB): see ir/page_mapping.h. On huge pages VGG-19's creation, which folds 548 MB of weights,
// took 443 ms against 1.79 s on 4 KB pages (Zen 5 VM, 1 thread), AlexNet's 113 against 752.
void* map_zeroed(size_t bytes, size_t* mapped) {
  if (bytes >= ir::kHugePageBytes && ir::free_huge_pages_cover(bytes)) {
    const size_t len = (bytes + ir::kHugePageBytes - 1) / ir::kHugePageBytes * ir::kHugePageBytes;
    if (void* p = ir::map_zeroed_aligned(len, true)) {
      *mapped = len;
      return p;
    }
  }
  const size_t len = (bytes + 4095) / 4096 * 4096;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  *mapped = len;
  return p;
}
}  // namespace

Storage::LongLivedScope::LongLivedScope() { ++tl_long_lived; }
Storage::LongLivedScope::~LongLivedScope() { --tl_long_lived; }

std::shared_ptr<Storage> Storage::allocate(size_t bytes) {
  maybe_inject_fault(bytes);
  g_storage_allocations.fetch_add(1, std::memory_order_relaxed);
  auto s = std::shared_ptr<Storage>(new Storage());
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  if (tl_long_lived > 0 && rounded >= kMappedBlock) {
    // Long-lived large blocks (the weights constant folding makes at session creation) come from an
    // anonymous mapping, which the kernel hands out zeroed: no memset pass over memory that the caller
    // fills next anyway (VGG-19's creation folds 548 MB: 765 -> 660 ms). Not for every large block: a
    // kernel temporary or an output allocated run after run would fault its pages in each time, where
    // malloc's heap reuse does not (an 8 MB Add output in a loop: 19 -> 5 GB/s). malloc if it fails.
    if (void* p = map_zeroed(rounded, &s->mapped_bytes_)) {
      s->data_ = p;
      s->bytes_ = bytes;
      s->owned_ = true;
      return s;
    }
  }
  s->data_ = bytes <= PTRDIFF_MAX ? std::aligned_alloc(64, rounded) : nullptr;
  if (!s->data_) throw AllocationError("cannot allocate " + std::to_string(bytes) + " bytes");
  std::memset(s->data_, 0, rounded);
  s->bytes_ = bytes;
  s->owned_ = true;
  return s;
}

std::shared_ptr<Storage> Storage::borrow(void* data, size_t bytes, std::shared_ptr<void> keepalive) {
  auto s = std::shared_ptr<Storage>(new Storage());
  s->data_ = data;
  s->bytes_ = bytes;
  s->keepalive_ = std::move(keepalive);
  return s;
}

std::shared_ptr<Storage> Storage::strings(size_t count) {
  maybe_inject_fault(count * sizeof(std::string));
  auto s = std::shared_ptr<Storage>(new Storage());
  s->is_strings_ = true;
  s->strings_.resize(count);
  s->bytes_ = count * sizeof(std::string);
  return s;
}

Storage::~Storage() {
  if (!owned_) return;
  if (mapped_bytes_ > 0) {
    munmap(data_, mapped_bytes_);
  } else {
    std::free(data_);
  }
}

// ---------------------------------------------------------------------------------------------
// Tensor

Tensor::Tensor(DataType dtype, Dims shape) : dtype_(dtype), shape_(std::move(shape)) {
  size_t bytes = 0;
  if (!shape_storage_bytes(dtype_, shape_, &bytes)) {
    throw AllocationError(std::string("cannot allocate a tensor of ") + dtype_name(dtype_) + shape_to_string(shape_) +
                          ": its size does not fit in memory");
  }
  if (dtype_ == DataType::kString) {
    storage_ = Storage::strings(static_cast<size_t>(shape_numel(shape_)));
  } else {
    storage_ = Storage::allocate(bytes);
  }
}

Tensor::Tensor(DataType dtype, Dims shape, std::shared_ptr<Storage> storage, int64_t byte_offset, Dims strides)
    : dtype_(dtype), shape_(std::move(shape)), strides_(std::move(strides)), offset_(byte_offset),
      storage_(std::move(storage)) {
  if (!strides_.empty() && strides_ == contiguous_strides(shape_)) strides_.clear();
}

Tensor Tensor::borrow(DataType dtype, Dims shape, void* data, std::shared_ptr<void> keepalive) {
  size_t bytes = dtype_storage_bytes(dtype, shape_numel(shape));
  return Tensor(dtype, std::move(shape), Storage::borrow(data, bytes, std::move(keepalive)));
}

Tensor Tensor::scalar_int64(int64_t v) {
  Tensor t(DataType::kInt64, {});
  *t.data<int64_t>() = v;
  return t;
}

Tensor Tensor::scalar_float(float v) {
  Tensor t(DataType::kFloat, {});
  *t.data<float>() = v;
  return t;
}

bool Tensor::is_contiguous() const {
  if (strides_.empty()) return true;
  return strides_ == contiguous_strides(shape_);
}

void* Tensor::raw_data() {
  if (!storage_ || storage_->is_strings()) return nullptr;
  return static_cast<char*>(storage_->data()) + offset_;
}

const void* Tensor::raw_data() const {
  if (!storage_ || storage_->is_strings()) return nullptr;
  return static_cast<const char*>(storage_->data()) + offset_;
}

std::string* Tensor::string_data() {
  if (!storage_ || !storage_->is_strings()) return nullptr;
  return storage_->string_data().data() + offset_;
}

const std::string* Tensor::string_data() const {
  if (!storage_ || !storage_->is_strings()) return nullptr;
  return storage_->string_data().data() + offset_;
}

Tensor Tensor::reshaped(Dims shape) const {
  Tensor t = contiguous();
  t.shape_ = std::move(shape);
  t.strides_.clear();
  return t;
}

namespace {

// Copies a strided tensor's elements into dst in row-major order.
template <typename Elem>
void gather_strided(const Elem* src, Elem* dst, const Dims& shape, const Dims& strides) {
  const size_t rank = shape.size();
  int64_t n = shape_numel(shape);
  if (n == 0) return;
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t inner = shape[rank - 1];
  const int64_t inner_stride = strides[rank - 1];
  auto outer = ir::strided_cursor(shape, rank - 1, strides);
  for (int64_t done = 0; done < n; done += inner, outer.next()) {
    const int64_t base = outer.offset(0);
    if (inner_stride == 1) {
      for (int64_t i = 0; i < inner; ++i) dst[done + i] = src[base + i];
    } else {
      for (int64_t i = 0; i < inner; ++i) dst[done + i] = src[base + i * inner_stride];
    }
  }
}

// Copies elements between two strided layouts of the same shape, innermost axis as the inner loop.
template <typename Elem>
void copy_strided(const Elem* src, const Dims& ss0, Elem* dst, const Dims& ds0, const Dims& shape0) {
  const int64_t n = shape_numel(shape0);
  if (n == 0) return;
  // Drop size-1 axes and merge neighbours that are contiguous in both layouts, so the inner run is as
  // long as possible (a channel-shuffle transpose copies whole H*W planes, not rows of W).
  Dims shape, ss, ds;
  for (size_t ax = 0; ax < shape0.size(); ++ax) {
    if (shape0[ax] == 1) continue;
    if (!shape.empty() && ss.back() == ss0[ax] * shape0[ax] && ds.back() == ds0[ax] * shape0[ax]) {
      shape.back() *= shape0[ax];
      ss.back() = ss0[ax];
      ds.back() = ds0[ax];
      continue;
    }
    shape.push_back(shape0[ax]);
    ss.push_back(ss0[ax]);
    ds.push_back(ds0[ax]);
  }
  const size_t rank = shape.size();
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t inner = shape[rank - 1];
  const int64_t si = ss[rank - 1], di = ds[rank - 1];
  if constexpr (sizeof(Elem) == 1) {
    // A byte matrix transposed (per outer index): the destination's rows run along the source's unit
    // stride. An 8-bit channels-last value copied as NCHW, or the reverse: by 16 x 16 blocks.
    if (rank >= 2 && di == 1 && si != 1 && ss[rank - 2] == 1) {
      const int64_t rows = shape[rank - 2];
      auto batch = ir::strided_cursor(shape, rank - 2, ss, ds);
      for (int64_t done = 0; done < n; done += rows * inner, batch.next()) {
        const uint8_t* s8 = reinterpret_cast<const uint8_t*>(src + batch.offset(0));
        uint8_t* d8 = reinterpret_cast<uint8_t*>(dst + batch.offset(1));
        // source (inner x rows, rows of si bytes) -> destination (rows x inner, rows ds[rank - 2] apart)
        ir::transpose_bytes(s8, inner, rows, si, d8, ds[rank - 2]);
      }
      return;
    }
  }
  auto outer = ir::strided_cursor(shape, rank - 1, ss, ds);
  for (int64_t done = 0; done < n; done += inner, outer.next()) {
    const int64_t sb = outer.offset(0), db = outer.offset(1);
    if (si == 1 && di == 1) {
      if constexpr (std::is_trivially_copyable_v<Elem>) {
        std::memcpy(dst + db, src + sb, static_cast<size_t>(inner) * sizeof(Elem));
      } else {
        std::copy(src + sb, src + sb + inner, dst + db);
      }
    } else {
      for (int64_t i = 0; i < inner; ++i) dst[db + i * di] = src[sb + i * si];
    }
  }
}

}  // namespace

Status copy_tensor_into(const Tensor& src, Tensor& dst) {
  if (src.dtype() != dst.dtype() || src.shape() != dst.shape()) {
    return invalid_argument("cannot copy " + src.describe() + " into " + dst.describe());
  }
  if (src.numel() == 0) return Status::Ok();
  if (src.is_contiguous() && dst.is_contiguous()) {
    if (src.dtype() == DataType::kString) {
      std::copy(src.string_data(), src.string_data() + src.numel(), dst.string_data());
    } else if (src.raw_data() != dst.raw_data()) {
      std::memmove(dst.raw_data(), src.raw_data(), src.nbytes());
    }
    return Status::Ok();
  }
  const Dims ss = src.effective_strides(), ds = dst.effective_strides();
  if (src.dtype() == DataType::kString) {
    copy_strided(src.string_data(), ss, dst.string_data(), ds, src.shape());
    return Status::Ok();
  }
  switch (dtype_bits(src.dtype())) {
    case 8: copy_strided(static_cast<const uint8_t*>(src.raw_data()), ss, dst.data<uint8_t>(), ds, src.shape()); break;
    case 16: copy_strided(static_cast<const uint16_t*>(src.raw_data()), ss, dst.data<uint16_t>(), ds, src.shape()); break;
    case 32: copy_strided(static_cast<const uint32_t*>(src.raw_data()), ss, dst.data<uint32_t>(), ds, src.shape()); break;
    case 64: copy_strided(static_cast<const uint64_t*>(src.raw_data()), ss, dst.data<uint64_t>(), ds, src.shape()); break;
    case 128: {
      struct B16 { uint64_t a, b; };
      copy_strided(static_cast<const B16*>(src.raw_data()), ss, dst.data<B16>(), ds, src.shape());
      break;
    }
    default: return invalid_argument("strided copy of sub-byte tensor " + src.describe());
  }
  return Status::Ok();
}

Tensor Tensor::contiguous(bool force) const {
  if (!force && is_contiguous()) return *this;
  Tensor out(dtype_, shape_);
  if (numel() == 0) return out;
  if (dtype_ == DataType::kString) {
    gather_strided(string_data(), out.string_data(), shape_, effective_strides());
    return out;
  }
  if (is_contiguous()) {
    std::memcpy(out.raw_data(), raw_data(), nbytes());
    return out;
  }
  const Dims st = effective_strides();
  switch (dtype_bits(dtype_)) {
    case 8: gather_strided(static_cast<const uint8_t*>(raw_data()), out.data<uint8_t>(), shape_, st); break;
    case 16: gather_strided(static_cast<const uint16_t*>(raw_data()), out.data<uint16_t>(), shape_, st); break;
    case 32: gather_strided(static_cast<const uint32_t*>(raw_data()), out.data<uint32_t>(), shape_, st); break;
    case 64: gather_strided(static_cast<const uint64_t*>(raw_data()), out.data<uint64_t>(), shape_, st); break;
    case 128: {
      struct B16 { uint64_t a, b; };
      gather_strided(static_cast<const B16*>(raw_data()), out.data<B16>(), shape_, st);
      break;
    }
    default: break;  // sub-byte tensors are never strided
  }
  return out;
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype_)) + shape_to_string(shape_);
}

// ---------------------------------------------------------------------------------------------
// Value

Value Value::sequence(std::vector<Value> items, DataType elem_type) {
  Value v;
  v.kind_ = Kind::kSequence;
  v.items_ = std::move(items);
  v.elem_type_ = elem_type;
  if (v.elem_type_ == DataType::kUndefined && !v.items_.empty() && v.items_[0].is_tensor()) {
    v.elem_type_ = v.items_[0].tensor().dtype();
  }
  return v;
}

Value Value::optional_empty() {
  Value v;
  v.kind_ = Kind::kOptional;
  return v;
}

Value Value::optional_of(Value inner) {
  Value v;
  v.kind_ = Kind::kOptional;
  v.items_.push_back(std::move(inner));
  return v;
}

Value Value::map(MapValue m) {
  Value v;
  v.kind_ = Kind::kMap;
  v.map_ = std::make_shared<MapValue>(std::move(m));
  return v;
}

std::string Value::describe() const {
  switch (kind_) {
    case Kind::kNone: return "none";
    case Kind::kTensor: return tensor_.describe();
    case Kind::kSequence: return "sequence<" + std::string(dtype_name(elem_type_)) + ">(" +
                                 std::to_string(items_.size()) + ")";
    case Kind::kOptional: return has_element() ? "optional(" + element().describe() + ")" : "optional(empty)";
    case Kind::kMap: return "map";
  }
  return "?";
}

}  // namespace nxrt
