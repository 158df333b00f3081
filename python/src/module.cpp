// nxrt._nxrt: the extension module behind the nxrt Python package (python/nxrt/). Everything here uses
// the public C++ API in include/nxrt/ only.
#include <pybind11/pybind11.h>

#include "bindings.h"
#include "errors.h"

#ifndef NXRT_VERSION
#error "NXRT_VERSION must be defined by the build (python/CMakeLists.txt)"
#endif

PYBIND11_MODULE(_nxrt, m) {
  namespace py = pybind11;
  m.doc() = "nxrt's C++ runtime, bound for Python. Use the nxrt package (import nxrt), not this module.";
  m.attr("__version__") = NXRT_VERSION;
  nxrt::python::register_errors(m);
  nxrt::python::bind_session(m);
  py::module_ genai = m.def_submodule("genai", "onnxruntime_genai-style text generation (nxrt.genai).");
  nxrt::python::bind_genai(genai);
}
