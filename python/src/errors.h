// nxrt::Status -> Python exceptions. Every error the package raises for a failed nxrt call is one of
// nxrt.capi.{InvalidArgument, Fail, NoSuchFile, InvalidGraph, NotImplemented} (named like ONNX
// Runtime's), all deriving from nxrt.NxrtError, itself a RuntimeError; the text is nxrt's message.
#pragma once
#include <pybind11/pybind11.h>

#include <exception>
#include <string>
#include <utility>

#include "nxrt/status.h"

namespace nxrt::python {

namespace py = pybind11;

// Thrown by binding code; the translator registered by register_errors raises the matching class.
class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)) {}
  const char* what() const noexcept override { return status_.message().c_str(); }
  const Status& status() const { return status_; }

 private:
  Status status_;
};

inline void check(const Status& s) {
  if (!s.ok()) throw StatusError(s);
}
template <typename T>
T take(Result<T>&& r) {
  if (!r.ok()) throw StatusError(r.status());
  return std::move(r).value();
}
[[noreturn]] inline void raise_invalid_argument(std::string message) {
  throw StatusError(invalid_argument(std::move(message)));
}
[[noreturn]] inline void raise_not_implemented(std::string message) {
  throw StatusError(not_implemented(std::move(message)));
}

// Creates the exception classes as attributes of `m` and registers the translator.
void register_errors(py::module_& m);

}  // namespace nxrt::python
