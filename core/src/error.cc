#include "refit/core/error.h"

namespace refit {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid argument";
    case ErrorCode::kParse:
      return "parse";
    case ErrorCode::kOutOfRange:
      return "out of range";
    case ErrorCode::kNotFound:
      return "not found";
    case ErrorCode::kMismatch:
      return "mismatch";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kRuntime:
      return "runtime";
    case ErrorCode::kTimeout:
      return "timeout";
    case ErrorCode::kPeerFailed:
      return "peer failed";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "unknown";
}

}  // namespace refit
