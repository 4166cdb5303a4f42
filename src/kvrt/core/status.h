// The runtime's error model: every fallible call returns Status or Result<T>.
// No exception crosses the kvrt API; messages name the binding, field or file.
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace kvrt {

enum class ErrorCode : int {
  kOk = 0,
  // Logical errors: the caller or the input is wrong.
  kInvalidArgument = 1,
  kInvalidProgram = 2,
  kInvalidState = 3,
  kNotSupported = 4,
  kNotFound = 5,
  // Resource errors.
  kMemoryAllocationFailed = 16,
  // Bugs or failures below us (driver, OS).
  kInternal = 32,
};

std::string_view error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // Ok
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok_status() { return Status(); }
  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "InvalidArgument: aliased input 'k_cache_0' must be device memory"
  std::string to_string() const;

  // Adds context in front of the message, keeping the code.
  Status with_context(std::string_view context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

namespace detail {
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
}  // namespace detail

// Builds a message from streamable parts: invalid_argument("binding '", name, "' ...").
template <typename... Parts>
Status make_error(ErrorCode code, const Parts&... parts) {
  return Status(code, detail::concat(parts...));
}
template <typename... Parts>
Status invalid_argument(const Parts&... parts) {
  return make_error(ErrorCode::kInvalidArgument, parts...);
}
template <typename... Parts>
Status invalid_program(const Parts&... parts) {
  return make_error(ErrorCode::kInvalidProgram, parts...);
}
template <typename... Parts>
Status invalid_state(const Parts&... parts) {
  return make_error(ErrorCode::kInvalidState, parts...);
}
template <typename... Parts>
Status not_supported(const Parts&... parts) {
  return make_error(ErrorCode::kNotSupported, parts...);
}
template <typename... Parts>
Status not_found(const Parts&... parts) {
  return make_error(ErrorCode::kNotFound, parts...);
}
template <typename... Parts>
Status allocation_failed(const Parts&... parts) {
  return make_error(ErrorCode::kMemoryAllocationFailed, parts...);
}
template <typename... Parts>
Status internal_error(const Parts&... parts) {
  return make_error(ErrorCode::kInternal, parts...);
}

}  // namespace kvrt

#define KVRT_STATUS_CONCAT_INNER(a, b) a##b
#define KVRT_STATUS_CONCAT(a, b) KVRT_STATUS_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is an error.
#define KVRT_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::kvrt::Status kvrt_status_ = (expr);        \
    if (!kvrt_status_.ok()) return kvrt_status_; \
  } while (0)

// Returns `status_expr` when `cond` is false.
#define KVRT_CHECK_OR_RETURN(cond, status_expr) \
  do {                                          \
    if (!(cond)) return (status_expr);          \
  } while (0)
