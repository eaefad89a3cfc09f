#pragma once
// Typed, validated access to the fields of a JSON object. Every error starts with the JSON path
// of the offending value ("hidden_size", "tensors[3].source.mesh[1]") so a user can find it.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "refit/core/error.h"

namespace refit::models::json_fields {

using Json = nlohmann::json;

// "a" + "b" -> "a.b"; "" + "b" -> "b".
std::string child(const std::string& path, std::string_view key);
std::string element(const std::string& path, std::size_t index);

// Parses text that must hold one JSON object; `what` names it in the error ("config.json").
Result<Json> parse_object(std::string_view text, std::string_view what);

// Absent and null count as missing.
bool has(const Json& object, std::string_view key);
// Integers must lie in [min_value, max_value].
Result<std::int64_t> require_int(const Json& object, std::string_view key, const std::string& path,
                                 std::int64_t min_value, std::int64_t max_value = INT64_MAX);
// nullopt when absent or null.
Result<std::optional<std::int64_t>> optional_int(const Json& object, std::string_view key,
                                                 const std::string& path, std::int64_t min_value,
                                                 std::int64_t max_value = INT64_MAX);
Result<bool> optional_bool(const Json& object, std::string_view key, const std::string& path,
                           bool fallback);
Result<std::string> require_string(const Json& object, std::string_view key,
                                   const std::string& path);
Result<const Json*> require_array(const Json& object, std::string_view key,
                                  const std::string& path);
Result<const Json*> require_object(const Json& object, std::string_view key,
                                   const std::string& path);
// Every element an integer in [min_value, max_value]; `path` names the array itself.
Result<std::vector<std::int64_t>> int_array(const Json& array, const std::string& path,
                                            std::int64_t min_value,
                                            std::int64_t max_value = INT64_MAX);

// Reads many fields of one object and keeps the first error, so a reader is a straight list of
// fields followed by one status() check. After an error every read returns a neutral value.
// Every integer it reads must be at most `max_value`.
class FieldReader {
 public:
  FieldReader(const Json& object, std::string path, std::int64_t max_value = INT64_MAX)
      : object_(object), path_(std::move(path)), max_(max_value) {}

  bool has(std::string_view key) const { return json_fields::has(object_, key); }
  // Present, even when null.
  bool contains(std::string_view key) const { return object_.contains(key); }
  std::int64_t integer(std::string_view key, std::int64_t min_value);
  std::optional<std::int64_t> optional_integer(std::string_view key, std::int64_t min_value);
  bool flag(std::string_view key, bool fallback);
  // An array of integers >= min_value; empty when absent or null.
  std::vector<std::int64_t> optional_integers(std::string_view key, std::int64_t min_value);
  std::string string(std::string_view key);
  // Records `message` about field `key` unless an error is already recorded.
  void fail(std::string_view key, const std::string& message);
  Result<void> status() const;

 private:
  template <class T>
  T keep(Result<T> r, T neutral);

  const Json& object_;
  std::string path_;
  std::int64_t max_ = INT64_MAX;
  std::optional<Error> error_;
};

}  // namespace refit::models::json_fields
