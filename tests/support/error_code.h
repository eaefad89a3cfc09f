#pragma once
// The kind of a failure, for tests that branch on it: EXPECT_EQ(error_code(r), ErrorCode::kParse)
// fails both when r holds another kind of error and when it holds a value.
#include <optional>
#include <ostream>

#include "refit/core/error.h"

namespace refit {

// GoogleTest prints codes by name ("parse") instead of as raw bytes.
inline void PrintTo(ErrorCode code, std::ostream* os) { *os << error_code_name(code); }

namespace testing {

template <class T>
std::optional<ErrorCode> error_code(const Result<T>& r) {
  if (r) return std::nullopt;
  return r.error().code;
}

}  // namespace testing
}  // namespace refit
