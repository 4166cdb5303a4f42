#include "kvrt/core/status.h"

namespace kvrt {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "Ok";
    case ErrorCode::kInvalidArgument:
      return "InvalidArgument";
    case ErrorCode::kInvalidProgram:
      return "InvalidProgram";
    case ErrorCode::kInvalidState:
      return "InvalidState";
    case ErrorCode::kNotSupported:
      return "NotSupported";
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kMemoryAllocationFailed:
      return "MemoryAllocationFailed";
    case ErrorCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

std::string Status::to_string() const {
  if (ok()) return "Ok";
  std::string out(error_code_name(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  std::string message(context);
  message += ": ";
  message += message_;
  return Status(code_, std::move(message));
}

}  // namespace kvrt
