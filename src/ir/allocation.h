// How the runtime reports memory it cannot have. Internal: the executor and the public entry points
// (Session::create / run, the genai Generator) turn these exceptions into error Statuses, so they never
// reach a caller of the public API.
#pragma once
#include <cstddef>
#include <new>
#include <string>
#include <utility>

#include "nxrt/dims.h"
#include "nxrt/dtype.h"

namespace nxrt {

// Bytes a contiguous tensor of `shape` needs (strings: one std::string each); false when a dim is
// negative or the element count or byte size overflows (a shape no allocation can hold).
bool shape_storage_bytes(DataType dtype, const Dims& shape, size_t* bytes);

// Thrown when memory cannot be had: Storage::allocate failed (or a test injected a failure,
// ir/alloc_faults.h), a session's memory limit would be exceeded (session/buffer_pool.h), or
// Tensor(dtype, shape) got a shape whose size overflows. A std::bad_alloc with a message.
class AllocationError : public std::bad_alloc {
 public:
  explicit AllocationError(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

}  // namespace nxrt
