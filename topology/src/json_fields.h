#pragma once
// Typed access to the fields of one JSON object; every error names the field's JSON path
// ("gpus[3].node: missing", "nics[0].gbps: expected a number, got string").
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "first_error.h"
#include "refit/core/error.h"
#include "refit/core/units.h"

namespace refit::detail {

class JsonFields {
 public:
  // Fails unless `json` is an object whose keys are all in `known`. `path` is "" for the root.
  static Result<JsonFields> open(const nlohmann::json& json, std::string path,
                                 std::initializer_list<std::string_view> known);

  bool has(std::string_view key) const { return json_->contains(key); }
  std::string path(std::string_view key) const;

  Result<std::int32_t> integer(std::string_view key) const;
  Result<std::int32_t> integer_or(std::string_view key, std::int32_t fallback) const;
  Result<double> number(std::string_view key) const;
  Result<std::string> string_or(std::string_view key, std::string fallback) const;
  Result<std::vector<GpuId>> gpu_list(std::string_view key) const;
  // The elements of a required array field, each with its path ("gpus[3]").
  Result<std::vector<std::pair<const nlohmann::json*, std::string>>> array(std::string_view key) const;
  Result<JsonFields> object_or_empty(std::string_view key,
                                     std::initializer_list<std::string_view> known) const;

 private:
  JsonFields(const nlohmann::json* json, std::string path) : json_(json), path_(std::move(path)) {}
  Result<const nlohmann::json*> field(std::string_view key) const;

  const nlohmann::json* json_;
  std::string path_;
};

}  // namespace refit::detail
