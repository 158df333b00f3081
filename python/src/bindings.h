// The parts of the nxrt._nxrt extension module, each binding one header of include/nxrt/.
#pragma once
#include <pybind11/pybind11.h>

namespace nxrt::python {

namespace py = pybind11;

void bind_session(py::module_& m);  // session.h: Session, NodeArg, ModelMetadata, OrtValue, IOBinding
void bind_genai(py::module_& m);    // genai.h: Config, Model, GeneratorParams, Generator

}  // namespace nxrt::python
