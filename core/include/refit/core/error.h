#pragma once
// Errors travel through std::expected; the message always names the offending input
// (tensor, field, JSON path, rank) so a user can find what to fix, and the code says what kind of
// failure it is, so that callers (and tests) branch on the code, never on the message.
#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace refit {

enum class ErrorCode {
  // Bad input: the CLI exits with code 2.
  kInvalidArgument,  // a value that is not allowed where it is given
  kParse,            // text that is not well-formed: JSON, XML, a number, an option's syntax
  kOutOfRange,       // a number outside its allowed range: zero, negative, too large, not finite
  kNotFound,         // a named thing does not exist: file, preset, model, strategy, tensor, key
  kMismatch,         // inputs that disagree: a plan and its problem, buffers and a plan, ranks and a
                     // cluster, ranks that built different plans
  kUnsupported,      // well-formed and consistent, but beyond what refit or this build handles
  // Runtime failure: the CLI exits with code 1.
  kRuntime,     // the world failed: I/O, a transport, a device
  kTimeout,     // a bounded wait ran out
  kPeerFailed,  // another rank of the job died or failed
  kInternal,    // refit broke one of its own invariants: a bug to report
};

// "invalid argument", "parse", ... as printed and as the Python package names them.
std::string_view error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInvalidArgument;
  std::string message;

  bool is_bad_input() const { return code < ErrorCode::kRuntime; }
  // Prefix the message with where it happened, e.g. "tensor 'w': " or "gpus[3].node: ".
  Error in(const std::string& context) && {
    message = context + ": " + message;
    return std::move(*this);
  }
};

template <class T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> fail(ErrorCode code, std::string message) {
  return std::unexpected<Error>(Error{.code = code, .message = std::move(message)});
}
inline std::unexpected<Error> invalid(std::string message) {
  return fail(ErrorCode::kInvalidArgument, std::move(message));
}
inline std::unexpected<Error> parse_error(std::string message) {
  return fail(ErrorCode::kParse, std::move(message));
}
inline std::unexpected<Error> out_of_range(std::string message) {
  return fail(ErrorCode::kOutOfRange, std::move(message));
}
inline std::unexpected<Error> not_found(std::string message) {
  return fail(ErrorCode::kNotFound, std::move(message));
}
inline std::unexpected<Error> mismatch(std::string message) {
  return fail(ErrorCode::kMismatch, std::move(message));
}
inline std::unexpected<Error> unsupported(std::string message) {
  return fail(ErrorCode::kUnsupported, std::move(message));
}

}  // namespace refit
