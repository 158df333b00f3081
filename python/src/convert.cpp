#include "convert.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>

#include "errors.h"

namespace nxrt::python {

namespace {

// The element type whose numpy dtype carries `t` (itself when numpy has `t`).
DataType carrier_of(DataType t) {
  switch (t) {
    case DataType::kBFloat16: return DataType::kUInt16;
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
    case DataType::kFloat8E8M0:
    case DataType::kUInt4:
    case DataType::kUInt2:
    case DataType::kFloat4E2M1: return DataType::kUInt8;
    case DataType::kInt4:
    case DataType::kInt2: return DataType::kInt8;
    default: return t;
  }
}

// numpy's name for an element type numpy has (nxrt's dtype_name spelling is numpy's), else null.
const char* numpy_name(DataType t) {
  if (t == DataType::kString) return "object";
  if (t == DataType::kUndefined || carrier_of(t) != t) return nullptr;
  return dtype_name(t);
}

py::module_& numpy() {
  // Leaked on purpose: module objects must not be released after the interpreter is gone.
  static py::module_* np = new py::module_(py::module_::import("numpy"));
  return *np;
}

bool native_order(const py::dtype& d) {
  const char bo = d.byteorder();
  return bo == '=' || bo == '|' || bo == (__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? '<' : '>');
}

// Keeps a Python object alive from C++ (a borrowed tensor's storage); drops it under the GIL.
std::shared_ptr<void> hold(py::handle h) {
  h.inc_ref();
  return std::shared_ptr<void>(h.ptr(), [](void* p) {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    Py_DECREF(static_cast<PyObject*>(p));
  });
}

Dims shape_of(const py::array& a) {
  Dims s;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s.push_back(static_cast<int64_t>(a.shape(i)));
  return s;
}

std::vector<py::ssize_t> py_shape(const Tensor& t) {
  return std::vector<py::ssize_t>(t.shape().begin(), t.shape().end());
}

struct SubbyteRange {
  int bits;
  int64_t lo, hi;
};
SubbyteRange subbyte_range(DataType t) {
  switch (t) {
    case DataType::kInt4: return {4, -8, 7};
    case DataType::kInt2: return {2, -2, 1};
    case DataType::kUInt2: return {2, 0, 3};
    default: return {4, 0, 15};  // uint4, float4e2m1 codes
  }
}

// One carrier value per element -> packed (element i in byte i / (8 / bits), lowest bits first).
Tensor pack_subbyte(const py::array& carrier, DataType t) {
  const SubbyteRange r = subbyte_range(t);
  py::array a = numpy().attr("ascontiguousarray")(carrier, py::arg("dtype") = numpy_dtype_for(t));
  Tensor out(t, shape_of(a));
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  const int64_t n = out.numel();
  const int per = 8 / r.bits;
  const uint32_t mask = (1u << r.bits) - 1;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = r.lo < 0 ? static_cast<const int8_t*>(a.data())[i] : static_cast<const uint8_t*>(a.data())[i];
    if (v < r.lo || v > r.hi) {
      raise_invalid_argument("element " + std::to_string(i) + " is " + std::to_string(v) + ", which does not fit " +
                             onnx_elem_name(t) + " [" + std::to_string(r.lo) + ", " + std::to_string(r.hi) + "]");
    }
    const int shift = static_cast<int>(i % per) * r.bits;
    dst[i / per] = static_cast<uint8_t>(dst[i / per] | ((static_cast<uint32_t>(v) & mask) << shift));
  }
  return out;
}

py::array unpack_subbyte(const Tensor& packed) {
  const SubbyteRange r = subbyte_range(packed.dtype());
  const Tensor c = packed.contiguous();
  py::array out(numpy_dtype_for(packed.dtype()), py_shape(packed));
  const auto* src = static_cast<const uint8_t*>(c.raw_data());
  const int64_t n = c.numel();
  const int per = 8 / r.bits;
  const uint32_t mask = (1u << r.bits) - 1;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t v = (src[i / per] >> (static_cast<int>(i % per) * r.bits)) & mask;
    if (r.lo < 0) {
      const int32_t s = (v & (1u << (r.bits - 1))) ? static_cast<int32_t>(v) - (1 << r.bits) : static_cast<int32_t>(v);
      static_cast<int8_t*>(out.mutable_data())[i] = static_cast<int8_t>(s);
    } else {
      static_cast<uint8_t*>(out.mutable_data())[i] = static_cast<uint8_t>(v);
    }
  }
  return out;
}

Tensor strings_from_array(const py::array& a) {
  Tensor t(DataType::kString, shape_of(a));
  py::list flat = a.attr("ravel")().attr("tolist")();
  std::string* dst = t.string_data();
  size_t i = 0;
  for (py::handle item : flat) {
    if (PyUnicode_Check(item.ptr())) {
      Py_ssize_t len = 0;
      const char* s = PyUnicode_AsUTF8AndSize(item.ptr(), &len);
      if (!s) throw py::error_already_set();
      dst[i].assign(s, static_cast<size_t>(len));
    } else if (PyBytes_Check(item.ptr())) {
      dst[i] = std::string(PyBytes_AS_STRING(item.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(item.ptr())));
    } else {
      raise_invalid_argument("string tensor element " + std::to_string(i) + " is a " +
                             text(item.get_type().attr("__name__")) + ", not str or bytes");
    }
    ++i;
  }
  return t;
}

py::object strings_to_numpy(const Tensor& t) {
  const Tensor c = t.contiguous();
  py::list items;
  const std::string* src = c.string_data();
  for (int64_t i = 0; i < c.numel(); ++i) {
    PyObject* s = PyUnicode_DecodeUTF8(src[i].data(), static_cast<Py_ssize_t>(src[i].size()), "strict");
    if (!s) {  // not UTF-8: the bytes as they are
      PyErr_Clear();
      items.append(py::bytes(src[i]));
    } else {
      items.append(py::reinterpret_steal<py::object>(s));
    }
  }
  return numpy().attr("array")(items, py::arg("dtype") = py::dtype("object")).attr("reshape")(py_shape(t));
}

}  // namespace

const char* onnx_elem_name(DataType t) {
  // ONNX's names are nxrt's except for these two.
  if (t == DataType::kFloat) return "float";
  if (t == DataType::kDouble) return "double";
  return dtype_name(t);
}

std::string type_string(const ValueMeta& m) {
  const std::string inner = m.inner ? type_string(*m.inner) : std::string("unknown");
  switch (m.kind) {
    case ValueMeta::Kind::kTensor: return std::string("tensor(") + onnx_elem_name(m.dtype) + ")";
    case ValueMeta::Kind::kSparseTensor: return std::string("sparse_tensor(") + onnx_elem_name(m.dtype) + ")";
    case ValueMeta::Kind::kSequence: return "seq(" + inner + ")";
    case ValueMeta::Kind::kOptional: return "optional(" + inner + ")";
    case ValueMeta::Kind::kMap: return std::string("map(") + onnx_elem_name(m.dtype) + "," + inner + ")";
    case ValueMeta::Kind::kUnknown: break;
  }
  return "unknown";
}

std::string type_string(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kTensor: return std::string("tensor(") + onnx_elem_name(v.tensor().dtype()) + ")";
    case Value::Kind::kSequence:
      if (!v.items().empty()) return "seq(" + type_string(v.items().front()) + ")";
      return std::string("seq(tensor(") + onnx_elem_name(v.sequence_elem_type()) + "))";
    case Value::Kind::kOptional:
      return "optional(" + (v.has_element() ? type_string(v.element()) : std::string("unknown")) + ")";
    case Value::Kind::kMap:
      return std::string("map(") + onnx_elem_name(v.map_value().key_type) + ",tensor(" +
             onnx_elem_name(v.map_value().value_type) + "))";
    case Value::Kind::kNone: break;
  }
  return "none";
}

py::dtype numpy_dtype_for(DataType t) {
  // Built once; leaked like the numpy module (see numpy()).
  static std::array<py::object*, kMaxDataType + 1> cache{};
  const auto i = static_cast<int32_t>(t);
  if (i <= 0 || i > kMaxDataType) raise_invalid_argument("no numpy dtype for element type " + std::to_string(i));
  if (!cache[static_cast<size_t>(i)]) {
    const char* name = numpy_name(carrier_of(t));
    if (!name) raise_not_implemented(std::string("no numpy dtype for ") + onnx_elem_name(t));
    cache[static_cast<size_t>(i)] = new py::object(py::dtype(name));
  }
  return py::reinterpret_borrow<py::dtype>(*cache[static_cast<size_t>(i)]);
}

DataType dtype_from_numpy(const py::dtype& d) {
  const auto size = d.itemsize();
  switch (d.kind()) {
    case 'f': return size == 2 ? DataType::kFloat16 : size == 4 ? DataType::kFloat : size == 8 ? DataType::kDouble
                                                                                                 : DataType::kUndefined;
    case 'i':
      return size == 1 ? DataType::kInt8 : size == 2 ? DataType::kInt16 : size == 4 ? DataType::kInt32
                                                                       : size == 8 ? DataType::kInt64
                                                                                   : DataType::kUndefined;
    case 'u':
      return size == 1 ? DataType::kUInt8 : size == 2 ? DataType::kUInt16 : size == 4 ? DataType::kUInt32
                                                                         : size == 8 ? DataType::kUInt64
                                                                                     : DataType::kUndefined;
    case 'b': return DataType::kBool;
    case 'c': return size == 8 ? DataType::kComplex64 : size == 16 ? DataType::kComplex128 : DataType::kUndefined;
    case 'U':
    case 'S':
    case 'O': return DataType::kString;
    default: return DataType::kUndefined;
  }
}

DataType dtype_from_python(py::handle h) {
  if (PyLong_Check(h.ptr()) && !PyBool_Check(h.ptr())) {
    const long v = h.cast<long>();
    if (!is_known_dtype(static_cast<int32_t>(v))) raise_invalid_argument("unknown ONNX element type " + std::to_string(v));
    return static_cast<DataType>(v);
  }
  py::dtype d = py::dtype::from_args(py::reinterpret_borrow<py::object>(h));
  const DataType t = dtype_from_numpy(d);
  if (t == DataType::kUndefined) {
    raise_invalid_argument("numpy dtype " + text(d) + " has no ONNX element type");
  }
  return t;
}

Tensor tensor_from_array(const py::array& a, DataType declared) {
  const py::dtype d = a.dtype();
  const DataType own = dtype_from_numpy(d);
  if (own == DataType::kUndefined) {
    raise_invalid_argument("numpy dtype " + text(d) + " has no ONNX element type");
  }
  if (own == DataType::kString) return strings_from_array(a);
  // An array of a carrier type fed where its carried type is declared is taken as that type.
  const DataType type = (declared != DataType::kUndefined && declared != own && carrier_of(declared) == own) ? declared
                                                                                                             : own;
  if (dtype_is_subbyte(type)) return pack_subbyte(a, type);
  py::array src = a;
  constexpr int kInPlace = static_cast<int>(py::array::c_style) | static_cast<int>(py::detail::npy_api::NPY_ARRAY_ALIGNED_);
  if ((src.flags() & kInPlace) != kInPlace || !native_order(d)) {
    src = numpy().attr("require")(a, py::arg("dtype") = d.attr("newbyteorder")("="), py::arg("requirements") = "CA");
  }
  return Tensor::borrow(type, shape_of(src), const_cast<void*>(src.data()), hold(src));
}

Value value_from_python(py::handle obj, const ValueMeta* meta) {
  if (py::isinstance<PyOrtValue>(obj)) return obj.cast<const PyOrtValue&>().value;
  const ValueMeta::Kind kind = meta ? meta->kind : ValueMeta::Kind::kTensor;
  const ValueMeta* inner = meta ? meta->inner.get() : nullptr;
  switch (kind) {
    case ValueMeta::Kind::kSequence: {
      if (!py::isinstance<py::list>(obj) && !py::isinstance<py::tuple>(obj)) {
        raise_invalid_argument("expects " + type_string(*meta) + " (a list), got a " +
                               text(obj.get_type().attr("__name__")));
      }
      std::vector<Value> items;
      for (py::handle item : obj) items.push_back(value_from_python(item, inner));
      DataType elem = DataType::kUndefined;
      if (inner && inner->kind == ValueMeta::Kind::kTensor) elem = inner->dtype;
      if (elem == DataType::kUndefined && !items.empty() && items.front().is_tensor()) elem = items.front().tensor().dtype();
      return Value::sequence(std::move(items), elem);
    }
    case ValueMeta::Kind::kOptional:
      if (obj.is_none()) return Value::optional_empty();
      return Value::optional_of(value_from_python(obj, inner));
    case ValueMeta::Kind::kMap: {
      if (!py::isinstance<py::dict>(obj)) {
        raise_invalid_argument("expects " + type_string(*meta) + " (a dict), got a " +
                               text(obj.get_type().attr("__name__")));
      }
      py::dict d = py::reinterpret_borrow<py::dict>(obj);
      MapValue m;
      m.key_type = meta->dtype;
      m.value_type = inner ? inner->dtype : DataType::kUndefined;
      py::list values;
      for (auto [k, v] : d) {
        if (m.key_type == DataType::kString) {
          if (!py::isinstance<py::str>(k)) raise_invalid_argument("map keys must be str for " + type_string(*meta));
          m.string_keys.push_back(k.cast<std::string>());
        } else {
          m.int_keys.push_back(k.cast<int64_t>());
        }
        values.append(v);
      }
      py::array arr = m.value_type == DataType::kUndefined
                          ? py::array(numpy().attr("asarray")(values))
                          : py::array(numpy().attr("asarray")(values, py::arg("dtype") = numpy_dtype_for(m.value_type)));
      m.values = tensor_from_array(arr, m.value_type);
      if (m.value_type == DataType::kUndefined) m.value_type = m.values.dtype();
      return Value::map(std::move(m));
    }
    default: break;
  }
  const DataType declared = meta ? meta->dtype : DataType::kUndefined;
  if (py::isinstance<py::array>(obj)) return tensor_from_array(py::reinterpret_borrow<py::array>(obj), declared);
  // Lists and scalars take the declared element type when numpy has it.
  const bool natural = declared != DataType::kUndefined && declared != DataType::kString && carrier_of(declared) == declared;
  py::array arr = natural ? py::array(numpy().attr("asarray")(obj, py::arg("dtype") = numpy_dtype_for(declared)))
                          : py::array(numpy().attr("asarray")(obj));
  return tensor_from_array(arr, declared);
}

bool ShareGuard::may_share(const Tensor& t) {
  const Storage* s = t.storage().get();
  if (!share_ || !s || !t.is_contiguous()) return false;
  if (!s->pooled() && std::find(allowed_.begin(), allowed_.end(), s) == allowed_.end()) return false;
  if (std::find(handed_out_.begin(), handed_out_.end(), s) != handed_out_.end()) return false;
  handed_out_.push_back(s);
  return true;
}

py::object tensor_to_numpy(const Tensor& t, bool share) {
  if (t.dtype() == DataType::kString) return strings_to_numpy(t);
  if (dtype_is_subbyte(t.dtype())) return unpack_subbyte(t);
  const py::dtype d = numpy_dtype_for(t.dtype());
  if (share && t.is_contiguous() && t.storage()) {
    auto* keep = new std::shared_ptr<Storage>(t.storage());
    py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
    return py::array(d, py_shape(t), t.raw_data(), base);
  }
  const Tensor c = t.contiguous();
  py::array out(d, py_shape(t));
  if (c.nbytes() > 0) std::memcpy(out.mutable_data(), c.raw_data(), c.nbytes());
  return out;
}

py::object value_to_python(const Value& v, ShareGuard& guard) {
  switch (v.kind()) {
    case Value::Kind::kTensor: return tensor_to_numpy(v.tensor(), guard.may_share(v.tensor()));
    case Value::Kind::kSequence: {
      py::list out;
      for (const Value& item : v.items()) out.append(value_to_python(item, guard));
      return out;
    }
    case Value::Kind::kOptional:
      if (!v.has_element()) return py::none();
      return value_to_python(v.element(), guard);
    case Value::Kind::kMap: {
      const MapValue& m = v.map_value();
      py::list values = tensor_to_numpy(m.values, false).attr("tolist")();
      py::dict out;
      const bool string_keys = m.key_type == DataType::kString;
      const size_t n = string_keys ? m.string_keys.size() : m.int_keys.size();
      for (size_t i = 0; i < n && i < values.size(); ++i) {
        if (string_keys) out[py::str(m.string_keys[i])] = values[i];
        else out[py::int_(m.int_keys[i])] = values[i];
      }
      return out;
    }
    case Value::Kind::kNone: break;
  }
  return py::none();
}

Value detach_unshareable(const Value& v, ShareGuard& guard) {
  switch (v.kind()) {
    case Value::Kind::kTensor: return guard.may_share(v.tensor()) ? v : Value(v.tensor().clone());
    case Value::Kind::kSequence: {
      std::vector<Value> items;
      for (const Value& item : v.items()) items.push_back(detach_unshareable(item, guard));
      return Value::sequence(std::move(items), v.sequence_elem_type());
    }
    case Value::Kind::kOptional:
      return v.has_element() ? Value::optional_of(detach_unshareable(v.element(), guard)) : v;
    case Value::Kind::kMap: {
      MapValue m = v.map_value();
      m.values = m.values.clone();
      return Value::map(std::move(m));
    }
    case Value::Kind::kNone: break;
  }
  return v;
}

py::list shape_list(const ValueMeta& m) {
  py::list out;
  if (!m.has_shape) return out;
  for (size_t i = 0; i < m.shape.size(); ++i) {
    if (m.shape[i] >= 0) out.append(py::int_(m.shape[i]));
    else if (i < m.dim_names.size() && !m.dim_names[i].empty()) out.append(py::str(m.dim_names[i]));
    else out.append(py::none());
  }
  return out;
}

}  // namespace nxrt::python
