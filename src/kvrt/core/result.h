// Result<T>: a value or an error Status, never "ok without a value".
#pragma once

#include <cassert>
#include <type_traits>
#include <utility>
#include <variant>

#include "kvrt/core/status.h"

namespace kvrt {

template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<T, Status>, "use Status directly");

 public:
  Result(T value) : storage_(std::move(value)) {}  // NOLINT: implicit by design
  // An error Status. Passing an Ok status is a bug; it becomes kInternal so that it
  // can never be mistaken for a value.
  Result(Status status)  // NOLINT: implicit by design
      : storage_(status.ok() ? Status(ErrorCode::kInternal, "Result built from Ok status")
                             : std::move(status)) {}

  bool ok() const { return std::holds_alternative<T>(storage_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(storage_);
  }

  T& value() & {
    assert(ok());
    return std::get<T>(storage_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(storage_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(storage_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> storage_;
};

}  // namespace kvrt

// Evaluates a Result expression; on error returns its Status, else moves the value
// into `lhs` (which may be a declaration: `KVRT_ASSIGN_OR_RETURN(auto x, f())`).
#define KVRT_ASSIGN_OR_RETURN(lhs, expr) \
  KVRT_ASSIGN_OR_RETURN_IMPL(KVRT_STATUS_CONCAT(kvrt_result_, __LINE__), lhs, expr)
#define KVRT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                               \
  if (!tmp.ok()) return tmp.status();              \
  lhs = std::move(tmp).value()
