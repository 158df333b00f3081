#include "nxrt/status.h"

namespace nxrt {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kInvalidModel: return "invalid model";
    case StatusCode::kNotImplemented: return "not implemented";
    case StatusCode::kRuntimeError: return "runtime error";
    case StatusCode::kIoError: return "i/o error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

}  // namespace nxrt
