// Errors are values: every fallible call returns Status or Result<T>.
#pragma once
#include <string>
#include <utility>
#include <variant>

namespace nxrt {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // caller passed something wrong (feeds, options)
  kInvalidModel,     // the model file or graph is malformed
  kNotImplemented,   // an op / opset / dtype no provider supports
  kRuntimeError,     // a kernel failed while running
  kIoError,          // a file could not be read or written
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string to_string() const;

  // Prefix context ("node 'x' (Add): ") onto an error, keeping its code.
  Status with_context(const std::string& prefix) const {
    if (ok()) return *this;
    return Status(code_, prefix + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status invalid_model(std::string m) { return Status(StatusCode::kInvalidModel, std::move(m)); }
inline Status not_implemented(std::string m) { return Status(StatusCode::kNotImplemented, std::move(m)); }
inline Status runtime_error(std::string m) { return Status(StatusCode::kRuntimeError, std::move(m)); }
inline Status io_error(std::string m) { return Status(StatusCode::kIoError, std::move(m)); }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}           // NOLINT(implicit)
  Result(Status status) : v_(std::move(status)) {}    // NOLINT(implicit); must not be ok
  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace nxrt

#define NXRT_CONCAT_INNER_(a, b) a##b
#define NXRT_CONCAT_(a, b) NXRT_CONCAT_INNER_(a, b)

#define NXRT_RETURN_IF_ERROR(expr)                  \
  do {                                              \
    ::nxrt::Status nxrt_status_ = (expr);           \
    if (!nxrt_status_.ok()) return nxrt_status_;    \
  } while (0)

#define NXRT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(tmp).value()

#define NXRT_ASSIGN_OR_RETURN(lhs, expr) \
  NXRT_ASSIGN_OR_RETURN_IMPL_(NXRT_CONCAT_(nxrt_result_, __LINE__), lhs, expr)
