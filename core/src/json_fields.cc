#include "refit/core/json_fields.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "json_guard.h"
#include "refit/core/try.h"
#include "refit/core/utf8.h"

namespace refit::json_fields {

std::string describe(const Json& value) {
  // Never dump a non-empty container: its text can be as large, and as deep, as the input.
  if (value.is_array() && !value.empty()) return fmt::format("an array of {} elements", value.size());
  if (value.is_object() && !value.empty()) return fmt::format("an object of {} fields", value.size());
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

namespace {

[[nodiscard]] Result<std::int64_t> as_int(const Json& value, const std::string& path, std::int64_t min_value,
                                          std::int64_t max_value) {
  // An integer literal past 64 bits is parsed as a float: it is out of range, not a fraction.
  if (value.is_number_float() && std::abs(value.get<double>()) >= 0x1p63 &&
      std::floor(value.get<double>()) == value.get<double>())
    return out_of_range(fmt::format("{}: must be between {} and {}, got an integer of more than 64 bits",
                                    path, min_value, max_value));
  if (!value.is_number_integer())
    return invalid(fmt::format("{}: expected an integer, got {}", path, describe(value)));
  const bool huge = value.is_number_unsigned() && value.get<std::uint64_t>() > INT64_MAX;
  const auto v = huge ? INT64_MAX : value.get<std::int64_t>();
  if (v < min_value) return out_of_range(fmt::format("{}: must be >= {}, got {}", path, min_value, v));
  if (huge || v > max_value)
    return out_of_range(fmt::format("{}: must be <= {}, got {}", path, max_value, describe(value)));
  return v;
}

[[nodiscard]] Result<const Json*> require(const Json& object, std::string_view key, const std::string& path) {
  if (!has(object, key)) return invalid(fmt::format("{}: missing", child(path, key)));
  return &object.find(key).value();
}

// A field that must be there and of one JSON type (`kind` names it: "a string").
[[nodiscard]] Result<const Json*> require_kind(const Json& object, std::string_view key,
                                               const std::string& path, bool (Json::*is)() const noexcept,
                                               std::string_view kind) {
  auto value = require(object, key, path);
  if (value && !((**value).*is)())
    return invalid(fmt::format("{}: expected {}, got {}", child(path, key), kind, describe(**value)));
  return value;
}

}  // namespace

std::string child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

std::string element(const std::string& path, std::size_t index) { return fmt::format("{}[{}]", path, index); }

Result<Json> parse_object(std::string_view text, std::string_view what) {
  // The JSON parser ends its input at a NUL byte and would take what precedes it.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    return parse_error(fmt::format("{}: not valid JSON: a NUL byte at offset {}", what, nul));
  REFIT_TRY(check_json(text, what));
  const Json j = Json::parse(text);
  if (!j.is_object()) return invalid(fmt::format("{}: expected a JSON object", what));
  return j;
}

bool has(const Json& object, std::string_view key) {
  const auto it = object.find(key);
  return it != object.end() && !it->is_null();
}

Result<void> require_known_keys(const Json& object, const std::string& path,
                                std::initializer_list<std::string_view> known, std::string_view what) {
  if (!object.is_object())
    return invalid(
        fmt::format("{}: expected an object, got {}", path.empty() ? what : path, describe(object)));
  for (const auto& [key, value] : object.items())
    if (std::ranges::find(known, std::string_view(key)) == known.end())
      return not_found(
          fmt::format("{}: unknown field (expected one of: {})", child(path, key), fmt::join(known, ", ")));
  return {};
}

Result<std::int64_t> require_int(const Json& object, std::string_view key, const std::string& path,
                                 std::int64_t min_value, std::int64_t max_value) {
  const Json* value = REFIT_TRY(require(object, key, path));
  return as_int(*value, child(path, key), min_value, max_value);
}

Result<std::optional<std::int64_t>> optional_int(const Json& object, std::string_view key,
                                                 const std::string& path, std::int64_t min_value,
                                                 std::int64_t max_value) {
  if (!has(object, key)) return std::optional<std::int64_t>{};
  return std::optional<std::int64_t>{REFIT_TRY(require_int(object, key, path, min_value, max_value))};
}

Result<bool> optional_bool(const Json& object, std::string_view key, const std::string& path, bool fallback) {
  if (!has(object, key)) return fallback;
  const Json& value = object.find(key).value();
  if (!value.is_boolean())
    return invalid(fmt::format("{}: expected true or false, got {}", child(path, key), describe(value)));
  return value.get<bool>();
}

Result<double> require_number(const Json& object, std::string_view key, const std::string& path) {
  const Json* value = REFIT_TRY(require_kind(object, key, path, &Json::is_number, "a number"));
  const auto v = value->get<double>();
  // The parser refuses 1e309, but a Json built in memory (the Python package) may hold nan or inf.
  if (!std::isfinite(v)) return out_of_range(fmt::format("{}: must be a finite number", child(path, key)));
  return v;
}

Result<std::string> optional_string(const Json& object, std::string_view key, const std::string& path,
                                    std::string fallback) {
  if (!has(object, key)) return fallback;
  return require_string(object, key, path);
}

Result<std::string> require_string(const Json& object, std::string_view key, const std::string& path) {
  const Json* value = REFIT_TRY(require_kind(object, key, path, &Json::is_string, "a string"));
  return value->get<std::string>();
}

Result<const Json*> require_array(const Json& object, std::string_view key, const std::string& path) {
  return require_kind(object, key, path, &Json::is_array, "an array");
}

Result<const Json*> require_object(const Json& object, std::string_view key, const std::string& path) {
  return require_kind(object, key, path, &Json::is_object, "an object");
}

Result<std::vector<std::int64_t>> int_array(const Json& array, const std::string& path,
                                            std::int64_t min_value, std::int64_t max_value) {
  if (!array.is_array()) return invalid(fmt::format("{}: expected an array, got {}", path, describe(array)));
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < array.size(); ++i) {
    out.push_back(REFIT_TRY(as_int(array[i], element(path, i), min_value, max_value)));
  }
  return out;
}

template <class T>
T FieldReader::keep(Result<T> r, T neutral) {
  if (r) return std::move(*r);
  if (!error_) error_ = std::move(r.error());
  return neutral;
}

std::int64_t FieldReader::integer(std::string_view key, std::int64_t min_value) {
  if (error_) return min_value;
  return keep(require_int(object_, key, path_, min_value, max_), min_value);
}

std::int64_t FieldReader::integer_or(std::string_view key, std::int64_t min_value, std::int64_t fallback) {
  if (error_ || !has(key)) return fallback;
  return integer(key, min_value);
}

std::vector<std::int64_t> FieldReader::integers(std::string_view key, std::int64_t min_value) {
  if (error_) return {};
  const Json* items = array(key);
  if (!items) return {};
  return keep(int_array(*items, child(path_, key), min_value, max_), std::vector<std::int64_t>{});
}

double FieldReader::number(std::string_view key) {
  if (error_) return 0;
  return keep(require_number(object_, key, path_), 0.0);
}

double FieldReader::number_or(std::string_view key, double fallback) {
  if (error_ || !has(key)) return fallback;
  return number(key);
}

std::string FieldReader::string_or(std::string_view key, std::string fallback) {
  if (error_) return fallback;
  return keep(optional_string(object_, key, path_, fallback), fallback);
}

const Json* FieldReader::array(std::string_view key) {
  if (error_) return nullptr;
  return keep(require_array(object_, key, path_), static_cast<const Json*>(nullptr));
}

const Json* FieldReader::object(std::string_view key) {
  if (error_) return nullptr;
  return keep(require_object(object_, key, path_), static_cast<const Json*>(nullptr));
}

void FieldReader::keep_error(Result<void> r) {
  if (!r && !error_) error_ = std::move(r.error());
}

std::optional<std::int64_t> FieldReader::optional_integer(std::string_view key, std::int64_t min_value) {
  if (error_) return std::nullopt;
  return keep(optional_int(object_, key, path_, min_value, max_), std::optional<std::int64_t>{});
}

bool FieldReader::flag(std::string_view key, bool fallback) {
  if (error_) return fallback;
  return keep(optional_bool(object_, key, path_, fallback), fallback);
}

std::vector<std::int64_t> FieldReader::optional_integers(std::string_view key, std::int64_t min_value) {
  if (error_ || !has(key)) return {};
  return keep(int_array(object_.find(key).value(), child(path_, key), min_value, max_),
              std::vector<std::int64_t>{});
}

std::string FieldReader::string(std::string_view key) {
  if (error_) return {};
  return keep(require_string(object_, key, path_), std::string{});
}

std::string FieldReader::label(std::string_view key) {
  auto text = string(key);
  check_label(key, text);
  return text;
}

std::string FieldReader::label_or(std::string_view key, std::string fallback) {
  auto text = string_or(key, std::move(fallback));
  check_label(key, text);
  return text;
}

void FieldReader::check_label(std::string_view key, const std::string& text) {
  if (has_control_character(text))
    fail(key, "a control character (a line break or an escape) in a name refit prints");
}

void FieldReader::fail(std::string_view key, const std::string& message, ErrorCode code) {
  if (!error_) error_ = Error{.code = code, .message = child(path_, key) + ": " + message};
}

Result<void> FieldReader::status() const {
  if (error_) return std::unexpected(*error_);
  return {};
}

}  // namespace refit::json_fields
