// nxrt._nxrt.Session (the core of nxrt.InferenceSession), NodeArg, ModelMetadata, OrtValue and
// IOBinding, over the public API in include/nxrt/session.h.
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bindings.h"
#include "convert.h"
#include "errors.h"
#include "nxrt/session.h"

namespace nxrt::python {

namespace {

// A graph input or output as ONNX Runtime describes it: name, shape (ints, symbols, None), type string.
struct NodeArg {
  ValueMeta meta;
  std::string type;
  py::list shape;
};

NodeArg make_node_arg(const ValueMeta& m) { return NodeArg{m, type_string(m), shape_list(m)}; }

struct PySession {
  std::unique_ptr<Session> session;
  std::vector<NodeArg> inputs, outputs, overridable;
  std::unordered_map<std::string, const ValueMeta*> input_meta;

  explicit PySession(std::unique_ptr<Session> s) : session(std::move(s)) {
    for (const ValueMeta& m : session->inputs()) {
      (m.has_default ? overridable : inputs).push_back(make_node_arg(m));
      input_meta[m.name] = &m;
    }
    for (const ValueMeta& m : session->outputs()) outputs.push_back(make_node_arg(m));
  }

  const ValueMeta* meta_of(const std::string& name) const {
    auto it = input_meta.find(name);
    return it == input_meta.end() ? nullptr : it->second;
  }

  // Feeds from {name: value}; conversion errors name the input.
  std::vector<std::pair<std::string, Value>> feeds_from(const py::dict& feed) const {
    std::vector<std::pair<std::string, Value>> feeds;
    feeds.reserve(feed.size());
    for (auto [key, obj] : feed) {
      if (!PyUnicode_Check(key.ptr())) raise_invalid_argument("input names must be str, got " + std::string(py::repr(key)));
      std::string name = key.cast<std::string>();
      const ValueMeta* meta = meta_of(name);
      try {
        Value v = value_from_python(obj, meta);
        feeds.emplace_back(std::move(name), std::move(v));
      } catch (const StatusError& e) {
        throw StatusError(e.status().with_context("input '" + name + "': "));
      }
    }
    return feeds;
  }

  // Runs with the GIL released; the outputs, in order.
  std::vector<Value> run_values(const py::object& output_names, const py::dict& feed) {
    auto feeds = feeds_from(feed);
    Result<std::vector<Value>> result = std::vector<Value>{};
    if (output_names.is_none()) {
      py::gil_scoped_release nogil;
      result = session->run(feeds);
    } else {
      auto names = output_names.cast<std::vector<std::string>>();
      py::gil_scoped_release nogil;
      result = session->run(feeds, names);
    }
    // `feeds` dies here, with the GIL held: it may hold the last reference to an input array.
    return take(std::move(result));
  }
};

void check_device(const std::string& device_type, int device_id) {
  if (device_type != "cpu" && device_type != "CPU") {
    raise_invalid_argument("device '" + device_type + "': nxrt runs on the CPU only (device_type 'cpu')");
  }
  if (device_id != 0) raise_invalid_argument("device_id " + std::to_string(device_id) + ": nxrt has one CPU device, 0");
}

// Python's view of nxrt's IoBinding. Bound arrays stay alive through the borrowed tensors' storage.
struct PyIoBinding {
  std::shared_ptr<PySession> session;
  IoBinding binding;
  std::vector<const Storage*> bound_buffers;

  void bind_input_value(const std::string& name, Value v) { binding.bind_input(name, std::move(v)); }
  void bind_output_buffer(const std::string& name, Tensor buffer) {
    bound_buffers.push_back(buffer.storage().get());
    binding.bind_output(name, std::move(buffer));
  }
  ShareGuard guard() const {
    ShareGuard g;
    for (const Storage* s : bound_buffers) g.allow(s);
    return g;
  }
};

std::shared_ptr<PySession> session_of(py::handle obj) {
  // nxrt.InferenceSession keeps its core in `_sess`.
  if (py::hasattr(obj, "_sess")) return obj.attr("_sess").cast<std::shared_ptr<PySession>>();
  return obj.cast<std::shared_ptr<PySession>>();
}

// The tensor an OrtValue method works on; InvalidArgument naming the method when it holds something else.
// (V: PyOrtValue or const PyOrtValue.)
template <typename V>
auto& tensor_of(V& v, const char* method) {
  if (!v.value.is_tensor()) raise_invalid_argument(std::string(method) + "() needs a tensor; this OrtValue is " + type_string(v.value));
  return v.value.tensor();
}

Tensor tensor_at_address(DataType dtype, const std::vector<int64_t>& shape, uintptr_t address) {
  if (address == 0) raise_invalid_argument("buffer_ptr is null");
  return Tensor::borrow(dtype, Dims(shape), reinterpret_cast<void*>(address));
}

}  // namespace

void bind_session(py::module_& m) {
  m.def("optimizer_pass_names", &optimizer_pass_names, "nxrt's optimizer passes, by name, in the order they run.");
  py::class_<NodeArg>(m, "NodeArg", "A graph input or output: name, shape and ONNX type string.")
      .def_property_readonly("name", [](const NodeArg& a) { return a.meta.name; }, "The value's name in the graph.")
      .def_property_readonly(
          "shape", [](const NodeArg& a) { return a.shape; },
          "Dimensions: an int when fixed, the symbol's name when symbolic, None when unknown ([] when unranked).")
      .def_property_readonly("type", [](const NodeArg& a) { return a.type; },
                             "ONNX type string, e.g. 'tensor(float)', 'seq(tensor(int64))', 'map(string,tensor(float))'.")
      .def("__repr__", [](const NodeArg& a) {
        return "NodeArg(name=" + std::string(py::repr(py::str(a.meta.name))) + ", type=" +
               std::string(py::repr(py::str(a.type))) + ", shape=" + std::string(py::repr(a.shape)) + ")";
      });

  py::class_<ModelMetadata>(m, "ModelMetadata", "The model's descriptive fields (ModelProto / GraphProto).")
      .def_property_readonly("producer_name", [](const ModelMetadata& d) { return d.producer_name; })
      .def_property_readonly("producer_version", [](const ModelMetadata& d) { return d.producer_version; })
      .def_property_readonly("graph_name", [](const ModelMetadata& d) { return d.graph_name; })
      .def_property_readonly("graph_description", [](const ModelMetadata& d) { return d.graph_description; })
      .def_property_readonly("domain", [](const ModelMetadata& d) { return d.domain; })
      .def_property_readonly("description", [](const ModelMetadata& d) { return d.description; },
                             "ModelProto.doc_string.")
      .def_property_readonly("version", [](const ModelMetadata& d) { return d.model_version; }, "ModelProto.model_version.")
      .def_property_readonly("ir_version", [](const ModelMetadata& d) { return d.ir_version; })
      .def_property_readonly(
          "custom_metadata_map",
          [](const ModelMetadata& d) {
            py::dict out;
            for (const auto& [k, v] : d.custom) out[py::str(k)] = py::str(v);
            return out;
          },
          "ModelProto.metadata_props as a dict.");

  py::class_<PyOrtValue>(m, "OrtValue",
                         "A value nxrt can take or return without conversion: a tensor, a sequence, a map or an "
                         "optional. Tensors made from numpy arrays read the array's memory in place.")
      .def_static(
          "ortvalue_from_numpy",
          [](const py::array& a, const std::string& device_type, int device_id) {
            check_device(device_type, device_id);
            return PyOrtValue{Value(tensor_from_array(a, DataType::kUndefined))};
          },
          py::arg("numpy_obj"), py::arg("device_type") = "cpu", py::arg("device_id") = 0,
          "A tensor over the array's memory (no copy when it is C-contiguous, aligned and in native byte order; "
          "the OrtValue keeps the array alive). String arrays are copied.")
      .def_static(
          "ortvalue_from_numpy_with_onnx_type",
          [](const py::array& a, int onnx_element_type) {
            const DataType t = dtype_from_python(py::int_(onnx_element_type));
            Tensor tensor = tensor_from_array(a, t);
            if (tensor.dtype() != t) {
              raise_invalid_argument(std::string("an array of ") + text(a.dtype()) + " cannot hold " +
                                     onnx_elem_name(t) + " (expected numpy " +
                                     text(numpy_dtype_for(t)) + ")");
            }
            return PyOrtValue{Value(std::move(tensor))};
          },
          py::arg("data"), py::arg("onnx_element_type"),
          "A tensor of an element type numpy lacks, from its carrier array: bfloat16 from uint16 bits, float8 "
          "from uint8 bits, int4/int2 from int8 values, uint4/uint2/float4e2m1 from uint8 values.")
      .def_static(
          "ortvalue_from_shape_and_type",
          [](const std::vector<int64_t>& shape, const py::object& element_type, const std::string& device_type,
             int device_id) {
            check_device(device_type, device_id);
            for (int64_t d : shape) {
              if (d < 0) raise_invalid_argument("shape " + shape_to_string(Dims(shape)) + " has a negative dimension");
            }
            return PyOrtValue{Value(Tensor(dtype_from_python(element_type), Dims(shape)))};
          },
          py::arg("shape"), py::arg("element_type"), py::arg("device_type") = "cpu", py::arg("device_id") = 0,
          "A new zero-filled tensor (element_type: a numpy type or an ONNX element type number).")
      .def(
          "numpy",
          [](const PyOrtValue& v) { return tensor_to_numpy(tensor_of(v, "numpy"), true); },
          "The tensor as a numpy array sharing this value's memory (strings, sub-byte types and strided "
          "tensors are copied).")
      .def(
          "shape",
          [](const PyOrtValue& v) { return tensor_of(v, "shape").shape().to_vector(); },
          "The tensor's dimensions.")
      .def("data_type", [](const PyOrtValue& v) { return type_string(v.value); }, "ONNX type string, e.g. 'tensor(float)'.")
      .def(
          "element_type",
          [](const PyOrtValue& v) { return static_cast<int>(tensor_of(v, "element_type").dtype()); },
          "The ONNX element type number (TensorProto.DataType).")
      .def("is_tensor", [](const PyOrtValue& v) { return v.value.is_tensor(); })
      .def("is_sparse_tensor", [](const PyOrtValue&) { return false; })
      .def("is_tensor_sequence", [](const PyOrtValue& v) { return v.value.is_sequence(); })
      .def("is_map", [](const PyOrtValue& v) { return v.value.is_map(); })
      .def("is_optional", [](const PyOrtValue& v) { return v.value.is_optional(); })
      .def(
          "has_value", [](const PyOrtValue& v) { return !v.value.is_optional() || v.value.has_element(); },
          "False for an empty optional, True otherwise.")
      .def("device_name", [](const PyOrtValue&) { return std::string("cpu"); })
      .def(
          "data_ptr",
          [](const PyOrtValue& v) { return reinterpret_cast<uintptr_t>(tensor_of(v, "data_ptr").raw_data()); },
          "Address of the first element.")
      .def(
          "update_inplace",
          [](PyOrtValue& v, const py::array& a) {
            Tensor& dst = tensor_of(v, "update_inplace");
            if (dst.dtype() == DataType::kString || dtype_is_subbyte(dst.dtype())) {
              raise_invalid_argument(std::string("update_inplace() needs a tensor of whole bytes, not ") + onnx_elem_name(dst.dtype()));
            }
            Tensor src = tensor_from_array(a, dst.dtype());
            if (src.dtype() != dst.dtype() || src.numel() != dst.numel()) {
              raise_invalid_argument("update_inplace: got " + src.describe() + " for a " + dst.describe());
            }
            Tensor view = src.reshaped(dst.shape());
            check(copy_tensor_into(view, dst));
          },
          py::arg("np_arr"), "Copies the array's elements into this tensor's memory (same dtype and size).")
      .def(
          "as_python",
          [](const PyOrtValue& v) {
            ShareGuard guard;
            return value_to_python(v.value, guard);
          },
          "nxrt extension: the value as run() returns it (numpy array, list, dict or None).")
      .def("__repr__", [](const PyOrtValue& v) { return "OrtValue(" + v.value.describe() + ")"; });

  py::class_<PySession, std::shared_ptr<PySession>>(m, "Session", "The C++ session behind nxrt.InferenceSession.")
      .def(py::init([](const py::object& model, int threads, int opt_level, const std::string& trace_path,
                       const std::string& optimized_model_path, int log_level, const std::vector<std::string>& disabled) {
             SessionOptions o;
             o.disabled_optimizers = disabled;
             o.threads = threads;
             o.opt_level = static_cast<OptLevel>(opt_level);
             o.trace_path = trace_path;
             o.optimized_model_path = optimized_model_path;
             o.log_level = log_level;
             // Python bytes are immutable and `model` holds them: safe to read with the GIL released.
             const bool from_bytes = PyBytes_Check(model.ptr());
             const char* bytes = from_bytes ? PyBytes_AS_STRING(model.ptr()) : nullptr;
             const size_t size = from_bytes ? static_cast<size_t>(PyBytes_GET_SIZE(model.ptr())) : 0;
             const std::string path = from_bytes ? std::string() : model.cast<std::string>();
             auto created = [&] {
               py::gil_scoped_release nogil;
               return from_bytes ? Session::create_from_bytes(bytes, size, o) : Session::create(path, o);
             }();
             std::unique_ptr<Session> s = take(std::move(created));
             return std::make_shared<PySession>(std::move(s));
           }),
           py::arg("model"), py::arg("threads") = 1, py::arg("opt_level") = 2, py::arg("trace_path") = "",
           py::arg("optimized_model_path") = "", py::arg("log_level") = -1,
           py::arg("disabled_optimizers") = std::vector<std::string>{})
      .def_property_readonly("inputs", [](const PySession& s) { return s.inputs; })
      .def_property_readonly("outputs", [](const PySession& s) { return s.outputs; })
      .def_property_readonly("overridable_initializers", [](const PySession& s) { return s.overridable; })
      .def_property_readonly("metadata", [](const PySession& s) { return s.session->metadata(); })
      .def(
          "run",
          [](PySession& s, const py::object& output_names, const py::dict& feed) {
            ShareGuard guard;
            py::list out;
            for (const Value& v : s.run_values(output_names, feed)) out.append(value_to_python(v, guard));
            return out;
          },
          py::arg("output_names"), py::arg("input_feed"))
      .def(
          "run_with_ort_values",
          [](PySession& s, const py::object& output_names, const py::dict& feed) {
            ShareGuard guard;
            std::vector<PyOrtValue> out;
            for (const Value& v : s.run_values(output_names, feed)) out.push_back(PyOrtValue{detach_unshareable(v, guard)});
            return out;
          },
          py::arg("output_names"), py::arg("input_feed"))
      .def("run_with_iobinding",
           [](PySession& s, PyIoBinding& b) {
             if (b.session.get() != &s) raise_invalid_argument("this IOBinding belongs to another session");
             Status st;
             {
               py::gil_scoped_release nogil;
               st = s.session->run(b.binding);
             }
             check(st);
           })
      .def("end_profiling", [](PySession& s) { return take(s.session->end_profiling()); })
      .def(
          "_cpp_run_seconds",
          [](PySession& s, const py::dict& feed, int runs) {
            const auto feeds = s.feeds_from(feed);
            Status failed;
            double seconds = 0;
            {
              py::gil_scoped_release nogil;
              const auto t0 = std::chrono::steady_clock::now();
              for (int i = 0; i < runs && failed.ok(); ++i) {
                auto r = s.session->run(feeds);
                if (!r.ok()) failed = r.status();
              }
              seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            }
            check(failed);
            return seconds;
          },
          py::arg("input_feed"), py::arg("runs"),
          "For bench/python_overhead.py: seconds taken by `runs` calls of the C++ Session::run on these feeds "
          "(converted once), the anchor the Python call is compared with.")
      .def(
          "read_value_file",
          [](const PySession& s, const std::string& path, const std::string& name) {
            const ValueMeta* meta = nullptr;
            for (const ValueMeta& m : s.session->inputs()) {
              if (m.name == name) meta = &m;
            }
            for (const ValueMeta& m : s.session->outputs()) {
              if (m.name == name) meta = &m;
            }
            if (!meta) raise_invalid_argument("'" + name + "' is neither an input nor an output of the model");
            std::string proto_name;
            Value v = take(read_value_file(path, meta, &proto_name));
            ShareGuard guard;
            return py::make_tuple(proto_name, value_to_python(v, guard));
          },
          py::arg("path"), py::arg("name"),
          "Reads an ONNX test-data .pb (TensorProto, SequenceProto, MapProto or OptionalProto) as the graph "
          "value `name` declares; returns (proto name, value as run() returns it).");

  py::class_<PyIoBinding>(m, "IOBinding",
                          "Inputs and outputs bound once and reused across runs (InferenceSession.io_binding()).")
      .def(py::init([](const py::object& session) { return PyIoBinding{session_of(session), {}, {}}; }),
           py::arg("session"))
      .def(
          "bind_cpu_input",
          [](PyIoBinding& b, const std::string& name, const py::array& a) {
            b.bind_input_value(name, tensor_from_array(a, b.session->meta_of(name) ? b.session->meta_of(name)->dtype
                                                                                    : DataType::kUndefined));
          },
          py::arg("name"), py::arg("arr_on_cpu"), "Binds a numpy array (read in place when contiguous).")
      .def(
          "bind_input",
          [](PyIoBinding& b, const std::string& name, const std::string& device_type, int device_id,
             const py::object& element_type, const std::vector<int64_t>& shape, uintptr_t buffer_ptr) {
            check_device(device_type, device_id);
            b.bind_input_value(name, tensor_at_address(dtype_from_python(element_type), shape, buffer_ptr));
          },
          py::arg("name"), py::arg("device_type"), py::arg("device_id"), py::arg("element_type"), py::arg("shape"),
          py::arg("buffer_ptr"), "Binds memory at buffer_ptr; the caller keeps it alive while bound.")
      .def(
          "bind_ortvalue_input",
          [](PyIoBinding& b, const std::string& name, const PyOrtValue& v) { b.bind_input_value(name, v.value); },
          py::arg("name"), py::arg("ortvalue"))
      .def(
          "bind_output",
          [](PyIoBinding& b, const std::string& name, const std::string& device_type, int device_id,
             const py::object& element_type, const py::object& shape, const py::object& buffer_ptr) {
            check_device(device_type, device_id);
            if (buffer_ptr.is_none()) {
              b.binding.bind_output(name);
              return;
            }
            if (element_type.is_none() || shape.is_none()) {
              raise_invalid_argument("bind_output with buffer_ptr needs element_type and shape");
            }
            b.bind_output_buffer(name, tensor_at_address(dtype_from_python(element_type),
                                                         shape.cast<std::vector<int64_t>>(), buffer_ptr.cast<uintptr_t>()));
          },
          py::arg("name"), py::arg("device_type") = "cpu", py::arg("device_id") = 0, py::arg("element_type") = py::none(),
          py::arg("shape") = py::none(), py::arg("buffer_ptr") = py::none(),
          "Without buffer_ptr the runtime allocates the output; with it the output is written there.")
      .def(
          "bind_ortvalue_output",
          [](PyIoBinding& b, const std::string& name, const PyOrtValue& v) {
            if (!v.value.is_tensor()) raise_invalid_argument("outputs can be bound to tensors only");
            b.bind_output_buffer(name, v.value.tensor());
          },
          py::arg("name"), py::arg("ortvalue"), "The output is written into this tensor's memory.")
      .def("synchronize_inputs", [](PyIoBinding&) {}, "No-op: nxrt runs on the CPU.")
      .def("synchronize_outputs", [](PyIoBinding&) {}, "No-op: nxrt runs on the CPU.")
      .def(
          "get_outputs",
          [](PyIoBinding& b) {
            ShareGuard guard = b.guard();
            std::vector<PyOrtValue> out;
            for (size_t i = 0; i < b.binding.num_outputs(); ++i) {
              out.push_back(PyOrtValue{detach_unshareable(b.binding.output(i), guard)});
            }
            return out;
          },
          "The bound outputs of the last run, as OrtValues (no copy).")
      .def(
          "copy_outputs_to_cpu",
          [](PyIoBinding& b) {
            ShareGuard copy_all(false);
            py::list out;
            for (size_t i = 0; i < b.binding.num_outputs(); ++i) out.append(value_to_python(b.binding.output(i), copy_all));
            return out;
          },
          "The bound outputs of the last run, copied into new numpy arrays.")
      .def("get_output_names",
           [](const PyIoBinding& b) {
             std::vector<std::string> names;
             for (size_t i = 0; i < b.binding.num_outputs(); ++i) names.push_back(b.binding.output_name(i));
             return names;
           })
      .def("clear_binding_inputs", [](PyIoBinding& b) { b.binding.clear_inputs(); })
      .def("clear_binding_outputs", [](PyIoBinding& b) {
        b.binding.clear_outputs();
        b.bound_buffers.clear();
      });
}

}  // namespace nxrt::python
