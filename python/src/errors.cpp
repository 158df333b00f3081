#include "errors.h"

namespace nxrt::python {

namespace {

struct ErrorClasses {
  PyObject* base = nullptr;  // nxrt.NxrtError
  PyObject* invalid_argument = nullptr;
  PyObject* fail = nullptr;
  PyObject* no_such_file = nullptr;
  PyObject* invalid_graph = nullptr;
  PyObject* not_implemented = nullptr;
};
// Created once at import and never freed: the translator may run until the interpreter exits.
ErrorClasses g_errors;

PyObject* new_class(py::module_& m, const char* qualified_name, const char* attr, PyObject* base, const char* doc) {
  PyObject* c = PyErr_NewExceptionWithDoc(qualified_name, doc, base, nullptr);
  if (!c) throw py::error_already_set();
  m.add_object(attr, py::handle(c));
  return c;
}

PyObject* class_for(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument: return g_errors.invalid_argument;
    case StatusCode::kInvalidModel: return g_errors.invalid_graph;
    case StatusCode::kNotImplemented: return g_errors.not_implemented;
    case StatusCode::kIoError: return g_errors.no_such_file;
    case StatusCode::kRuntimeError:
    case StatusCode::kOk: break;
  }
  return g_errors.fail;
}

}  // namespace

void register_errors(py::module_& m) {
  g_errors.base = new_class(m, "nxrt.NxrtError", "NxrtError", PyExc_RuntimeError,
                            "Base class of every error nxrt raises for a failed model load or run.");
  g_errors.invalid_argument = new_class(m, "nxrt.capi.InvalidArgument", "InvalidArgument", g_errors.base,
                                        "The caller passed something wrong: feeds, names, options, dtypes.");
  g_errors.fail = new_class(m, "nxrt.capi.Fail", "Fail", g_errors.base, "A kernel or the runtime failed while running.");
  g_errors.no_such_file = new_class(m, "nxrt.capi.NoSuchFile", "NoSuchFile", g_errors.base,
                                    "A file could not be read or written.");
  g_errors.invalid_graph = new_class(m, "nxrt.capi.InvalidGraph", "InvalidGraph", g_errors.base,
                                     "The model file or its graph is malformed.");
  g_errors.not_implemented = new_class(m, "nxrt.capi.NotImplemented", "NotImplemented", g_errors.base,
                                       "An op, opset, dtype or option nxrt does not support (yet).");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      PyErr_SetString(class_for(e.status().code()), e.status().message().c_str());
    }
  });
}

}  // namespace nxrt::python
