#pragma once
// Errors travel through std::expected; the message always names the offending input
// (tensor, field, JSON path, rank) so a user can find what to fix.
#include <expected>
#include <string>
#include <utility>

namespace refit {

enum class ErrorCode {
  kInvalidArgument,  // bad input from the user: the CLI maps it to exit code 2
  kNotFound,         // a named thing (file, preset, model) does not exist: also bad input
  kRuntime,          // the world failed (I/O, transport, peer): exit code 1
  kTimeout,          // a bounded wait ran out: exit code 1
};

struct Error {
  ErrorCode code = ErrorCode::kInvalidArgument;
  std::string message;

  bool is_bad_input() const { return code == ErrorCode::kInvalidArgument || code == ErrorCode::kNotFound; }
  // Prefix the message with where it happened, e.g. "tensor 'w': " or "gpus[3].node: ".
  Error in(const std::string& context) && {
    message = context + ": " + message;
    return std::move(*this);
  }
};

template <class T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> fail(ErrorCode code, std::string message) {
  return std::unexpected<Error>(Error{code, std::move(message)});
}
inline std::unexpected<Error> invalid(std::string message) {
  return fail(ErrorCode::kInvalidArgument, std::move(message));
}

}  // namespace refit
