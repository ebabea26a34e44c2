// Status and StatusOr: recoverable errors as values, with the data in the message.
// Library code returns these instead of throwing, exiting or printing.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace pipeplan {

enum class StatusCode {
  kOk,
  kInvalidArgument,     // bad user input (flags, files, plans)
  kFailedPrecondition,  // input is well formed but cannot be served (e.g. memory limit)
  kNotFound,
  kDeadlineExceeded,  // a wait ran past its deadline (runtime watchdog, transport timeouts)
  kAborted,           // the step was aborted because something else failed first
  kInternal,          // a bug in pipeplan
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "<context>: <message>".
  Status WithContext(const std::string& context) const {
    if (ok()) return *this;
    return {code_, context + ": " + message_};
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgument(std::string message) {
  return {StatusCode::kInvalidArgument, std::move(message)};
}
inline Status FailedPrecondition(std::string message) {
  return {StatusCode::kFailedPrecondition, std::move(message)};
}
inline Status NotFound(std::string message) { return {StatusCode::kNotFound, std::move(message)}; }
inline Status DeadlineExceeded(std::string message) {
  return {StatusCode::kDeadlineExceeded, std::move(message)};
}
inline Status Aborted(std::string message) { return {StatusCode::kAborted, std::move(message)}; }
inline Status Internal(std::string message) { return {StatusCode::kInternal, std::move(message)}; }

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : value_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(value_).ok() && "StatusOr needs a value or an error");
  }

  bool ok() const { return std::holds_alternative<T>(value_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(value_); }

  const T& value() const& { return std::get<T>(value_); }
  T& value() & { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<Status, T> value_;
};

}  // namespace pipeplan

// Early-return helpers; they keep call sites flat (LLVM style early exits).
#define PIPEPLAN_CONCAT_INNER(a, b) a##b
#define PIPEPLAN_CONCAT(a, b) PIPEPLAN_CONCAT_INNER(a, b)

#define PIPEPLAN_RETURN_IF_ERROR(expr)                   \
  do {                                                   \
    ::pipeplan::Status pipeplan_status_ = (expr);        \
    if (!pipeplan_status_.ok()) return pipeplan_status_; \
  } while (false)

#define PIPEPLAN_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#define PIPEPLAN_ASSIGN_OR_RETURN(lhs, expr) \
  PIPEPLAN_ASSIGN_OR_RETURN_IMPL(PIPEPLAN_CONCAT(pipeplan_or_, __LINE__), lhs, expr)
