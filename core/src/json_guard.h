#pragma once
// What parse_object enforces while nlohmann parses, before any value reaches a reader: a depth
// limit (readers, dump() and error messages recurse; nlohmann's own parser does not) and no
// duplicate key (nlohmann keeps the last one silently, so a file could say two things at once).
#include <string>

#include "refit/core/error.h"
#include "refit/core/json_fields.h"

namespace refit::json_fields {

// Thrown from the parser callback to stop the parse; parse_object turns it into an Error.
struct Refusal {
  ErrorCode code;
  std::string message;
};

// A fresh callback (each holds the state of one parse) that throws Refusal.
Json::parser_callback_t guard_callback();

}  // namespace refit::json_fields
