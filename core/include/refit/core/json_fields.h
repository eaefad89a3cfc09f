#pragma once
// Typed, validated access to the fields of a JSON object, for every reader of refit's JSON inputs
// (cluster files, HF configs, manifests, plans). Every error starts with the JSON path of the
// offending value ("hidden_size", "tensors[3].source.mesh[1]") so a user can find it.
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "refit/core/error.h"

namespace refit::json_fields {

using Json = nlohmann::json;

// "a" + "b" -> "a.b"; "" + "b" -> "b".
std::string child(const std::string& path, std::string_view key);
std::string element(const std::string& path, std::size_t index);

// Arrays and objects nest at most this deep in any JSON refit reads (its formats need 5).
inline constexpr std::size_t kMaxJsonDepth = 64;

// Parses text that must hold one JSON object; `what` names it in the error ("config.json").
// Refuses, naming the JSON path: syntax errors, numbers beyond double range (1e309), nesting
// deeper than kMaxJsonDepth, a key given twice in one object.
[[nodiscard]] Result<Json> parse_object(std::string_view text, std::string_view what);

// Absent and null count as missing.
bool has(const Json& object, std::string_view key);
// The value as error messages quote it: its JSON text, cut short.
std::string describe(const Json& value);
// Fails unless `object` is an object whose keys are all in `known` (a typo is named, with the
// keys that are allowed). `what` names the root when `path` is empty ("the cluster file").
[[nodiscard]] Result<void> require_known_keys(const Json& object, const std::string& path,
                                              std::initializer_list<std::string_view> known,
                                              std::string_view what = "the input");
// Integers must lie in [min_value, max_value].
[[nodiscard]] Result<std::int64_t> require_int(const Json& object, std::string_view key,
                                               const std::string& path, std::int64_t min_value,
                                               std::int64_t max_value = INT64_MAX);
// nullopt when absent or null.
[[nodiscard]] Result<std::optional<std::int64_t>> optional_int(const Json& object, std::string_view key,
                                                               const std::string& path,
                                                               std::int64_t min_value,
                                                               std::int64_t max_value = INT64_MAX);
[[nodiscard]] Result<bool> optional_bool(const Json& object, std::string_view key, const std::string& path,
                                         bool fallback);
[[nodiscard]] Result<double> require_number(const Json& object, std::string_view key,
                                            const std::string& path);
[[nodiscard]] Result<std::string> require_string(const Json& object, std::string_view key,
                                                 const std::string& path);
[[nodiscard]] Result<std::string> optional_string(const Json& object, std::string_view key,
                                                  const std::string& path, std::string fallback);
[[nodiscard]] Result<const Json*> require_array(const Json& object, std::string_view key,
                                                const std::string& path);
[[nodiscard]] Result<const Json*> require_object(const Json& object, std::string_view key,
                                                 const std::string& path);
// Every element an integer in [min_value, max_value]; `path` names the array itself.
[[nodiscard]] Result<std::vector<std::int64_t>> int_array(const Json& array, const std::string& path,
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
  std::int64_t integer_or(std::string_view key, std::int64_t min_value, std::int64_t fallback);
  std::optional<std::int64_t> optional_integer(std::string_view key, std::int64_t min_value);
  bool flag(std::string_view key, bool fallback);
  // An array of integers >= min_value; empty when absent or null.
  std::vector<std::int64_t> optional_integers(std::string_view key, std::int64_t min_value);
  // An array of integers >= min_value that must be there.
  std::vector<std::int64_t> integers(std::string_view key, std::int64_t min_value);
  double number(std::string_view key);
  double number_or(std::string_view key, double fallback);
  std::string string(std::string_view key);
  std::string string_or(std::string_view key, std::string fallback);
  // A string that refit prints as a label in its tables (a cluster's or NIC's name, a plan's
  // strategy): one without control characters, which would reach a terminal as escapes.
  std::string label(std::string_view key);
  std::string label_or(std::string_view key, std::string fallback);
  // A required array or object (nullptr after an error).
  const Json* array(std::string_view key);
  const Json* object(std::string_view key);
  std::string path(std::string_view key) const { return child(path_, key); }
  // Records `message` about field `key`, of kind `code`, unless an error is already recorded.
  void fail(std::string_view key, const std::string& message, ErrorCode code = ErrorCode::kInvalidArgument);
  // Records `error` (from a nested reader) unless an error is already recorded.
  void keep_error(Result<void> r);
  [[nodiscard]] Result<void> status() const;

 private:
  template <class T>
  T keep(Result<T> r, T neutral);
  void check_label(std::string_view key, const std::string& text);

  const Json& object_;
  std::string path_;
  std::int64_t max_ = INT64_MAX;
  std::optional<Error> error_;
};

}  // namespace refit::json_fields
