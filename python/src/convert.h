// Python <-> nxrt values: numpy arrays <-> Tensor, lists/dicts/None <-> sequences/maps/optionals, and the
// ONNX type strings ONNX Runtime's Python API prints.
//
// Element types numpy lacks travel as "carrier" arrays: bfloat16 as its uint16 bits, the float8 types
// and float8e8m0 as their uint8 bits, int4/int2 as one int8 value per element, uint4/uint2 and
// float4e2m1 as one uint8 value (code) per element. Run outputs of those types come back so, and an
// input declared with one of them accepts its carrier, so outputs can be fed back unchanged.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "nxrt/session.h"
#include "nxrt/tensor.h"

namespace nxrt::python {

namespace py = pybind11;

// str(obj) as a std::string (for messages).
inline std::string text(py::handle h) { return py::str(h).cast<std::string>(); }

// nxrt.OrtValue: one Value (tensor, sequence, map or optional).
struct PyOrtValue {
  Value value;
};

// "float", "int64", "float16", "bfloat16", "float8e4m3fn", ... (ONNX's names, as in "tensor(float)").
const char* onnx_elem_name(DataType t);
// "tensor(float)", "seq(tensor(int64))", "map(string,tensor(float))", "optional(tensor(float))".
std::string type_string(const ValueMeta& m);
std::string type_string(const Value& v);

// The numpy dtype outputs of this element type come back as (the carrier for types numpy lacks).
py::dtype numpy_dtype_for(DataType t);
// The element type `d` holds (strings: kString); kUndefined when none does.
DataType dtype_from_numpy(const py::dtype& d);
// A numpy dtype-like (np.float32, "float16", np.dtype(...)) or an ONNX element type number.
DataType dtype_from_python(py::handle h);

// numpy -> Tensor. `declared` is the element type expected (kUndefined: the array's own); an array of
// its carrier type is taken as that type. A C-contiguous, aligned, native-order array is borrowed in
// place (the tensor keeps the array alive); anything else is copied first.
Tensor tensor_from_array(const py::array& a, DataType declared);
// Python object -> Value, shaped by the declared type (nullptr: a tensor from whatever `obj` is):
// numpy arrays (or anything np.asarray takes) for tensors, lists for sequences, dicts for maps, None
// for an empty optional; an OrtValue is taken as is.
Value value_from_python(py::handle obj, const ValueMeta* meta);

// Decides which run outputs may come back as numpy views of nxrt's buffers. A view is safe when the
// block belongs to the run (pooled: the session reuses it only once nothing else refers to it) or is a
// buffer the caller bound, and no earlier output of the same result already shares it; everything
// else (initializers, the caller's inputs passed through, a second view of one block) is copied.
class ShareGuard {
 public:
  // share = false: every tensor is copied.
  explicit ShareGuard(bool share = true) : share_(share) {}
  void allow(const Storage* s) { allowed_.push_back(s); }
  bool may_share(const Tensor& t);

 private:
  bool share_;
  std::vector<const Storage*> allowed_;
  std::vector<const Storage*> handed_out_;
};

// Tensor -> numpy: a view that keeps the storage alive when `share` (and the layout allows it), else a
// copy. Strings become an object array of str.
py::object tensor_to_numpy(const Tensor& t, bool share);
// Value -> Python object (numpy / list / dict / None), deciding per tensor with `guard`.
py::object value_to_python(const Value& v, ShareGuard& guard);
// The same Value with every tensor the guard refuses replaced by a copy (for OrtValue results).
Value detach_unshareable(const Value& v, ShareGuard& guard);

// Shape as ONNX Runtime's NodeArg.shape: ints, symbol names, None for unknown dims ([] when unranked).
py::list shape_list(const ValueMeta& m);

}  // namespace nxrt::python
