#pragma once
// What parse_object enforces before any value reaches a reader: a depth limit (readers, dump()
// and error messages recurse; nlohmann's own parser does not) and no duplicate key (nlohmann
// keeps the last one silently, so a file could say two things at once). It runs as a SAX pass of
// its own: nlohmann's DOM parser with a callback rescans an array's elements at the end of each
// of its objects, quadratic in the array (12 s of 13 for a plan file of 200k segments).
#include <string_view>

#include "refit/core/error.h"
#include "refit/core/json_fields.h"

namespace refit::json_fields {

// Syntax errors (parse_error, naming line and column, as nlohmann words them), numbers beyond
// double range, nesting deeper than kMaxJsonDepth and a key twice in one object, each naming
// `what` and the JSON path.
[[nodiscard]] Result<void> check_json(std::string_view text, std::string_view what);

}  // namespace refit::json_fields
