#include "json_fields.h"

#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace refit::detail {
namespace {

std::string join_path(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : fmt::format("{}.{}", path, key);
}

Result<std::int32_t> as_integer(const nlohmann::json& j, const std::string& at) {
  if (!j.is_number_integer())
    return invalid(fmt::format("{}: expected an integer, got {}", at, j.type_name()));
  const auto v = j.get<std::int64_t>();
  if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
    return invalid(fmt::format("{}: {} is out of range", at, v));
  return static_cast<std::int32_t>(v);
}

}  // namespace

Result<JsonFields> JsonFields::open(const nlohmann::json& json, std::string path,
                                    std::initializer_list<std::string_view> known) {
  const auto where = path.empty() ? std::string("the cluster file") : path;
  if (!json.is_object())
    return invalid(fmt::format("{}: expected an object, got {}", where, json.type_name()));
  for (const auto& [key, value] : json.items()) {
    bool ok = false;
    for (const auto k : known) ok = ok || k == key;
    if (!ok)
      return invalid(fmt::format("{}: unknown field (expected one of: {})", join_path(path, key),
                                 fmt::join(known, ", ")));
  }
  return JsonFields(&json, std::move(path));
}

std::string JsonFields::path(std::string_view key) const { return join_path(path_, key); }

Result<const nlohmann::json*> JsonFields::field(std::string_view key) const {
  const auto it = json_->find(key);
  if (it == json_->end()) return invalid(fmt::format("{}: missing", path(key)));
  return &*it;
}

Result<std::int32_t> JsonFields::integer(std::string_view key) const {
  auto j = field(key);
  if (!j) return std::unexpected(j.error());
  return as_integer(**j, path(key));
}

Result<std::int32_t> JsonFields::integer_or(std::string_view key, std::int32_t fallback) const {
  return has(key) ? integer(key) : Result<std::int32_t>(fallback);
}

Result<double> JsonFields::number(std::string_view key) const {
  auto j = field(key);
  if (!j) return std::unexpected(j.error());
  if (!(*j)->is_number())
    return invalid(fmt::format("{}: expected a number, got {}", path(key), (*j)->type_name()));
  return (*j)->get<double>();
}

Result<std::string> JsonFields::string_or(std::string_view key, std::string fallback) const {
  if (!has(key)) return fallback;
  const auto& j = json_->at(key);
  if (!j.is_string()) return invalid(fmt::format("{}: expected a string, got {}", path(key), j.type_name()));
  return j.get<std::string>();
}

Result<std::vector<std::pair<const nlohmann::json*, std::string>>> JsonFields::array(
    std::string_view key) const {
  auto j = field(key);
  if (!j) return std::unexpected(j.error());
  if (!(*j)->is_array())
    return invalid(fmt::format("{}: expected an array, got {}", path(key), (*j)->type_name()));
  std::vector<std::pair<const nlohmann::json*, std::string>> out;
  for (std::size_t i = 0; i < (*j)->size(); ++i)
    out.emplace_back(&(**j)[i], fmt::format("{}[{}]", path(key), i));
  return out;
}

Result<std::vector<GpuId>> JsonFields::gpu_list(std::string_view key) const {
  auto items = array(key);
  if (!items) return std::unexpected(items.error());
  std::vector<GpuId> out;
  for (const auto& [j, at] : *items) {
    auto g = as_integer(*j, at);
    if (!g) return std::unexpected(g.error());
    out.emplace_back(*g);
  }
  return out;
}

Result<JsonFields> JsonFields::object_or_empty(std::string_view key,
                                               std::initializer_list<std::string_view> known) const {
  static const nlohmann::json kEmpty = nlohmann::json::object();
  return open(has(key) ? json_->at(key) : kEmpty, path(key), known);
}

}  // namespace refit::detail
