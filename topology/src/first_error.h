#pragma once
#include <optional>

#include "refit/core/error.h"

namespace refit::detail {

// The error of the first failed result among `results`, if any: lets a reader fetch all the
// fields of an object and report the first problem in field order.
template <class... Results>
std::optional<Error> first_error(const Results&... results) {
  std::optional<Error> error;
  ((error || results.has_value() ? void() : void(error = results.error())), ...);
  return error;
}

}  // namespace refit::detail
