#pragma once
// Where two JSON documents differ, as a path ("$.strategies[2].predicted_s: 1.5 -> 1.6"), or ""
// when they agree: numbers within a relative 1e-12 (or 1e-18 absolute, for zeros), everything
// else exactly. The first difference only, so that a failure names one field.
#include <algorithm>
#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace refit::testing {

template <typename Json>
std::string json_difference(const Json& want, const Json& got, const std::string& path = "$") {
  if (want.is_number() && got.is_number()) {
    const double a = want.template get<double>(), b = got.template get<double>();
    return std::abs(a - b) <= std::max(1e-12 * std::max(std::abs(a), std::abs(b)), 1e-18)
               ? ""
               : path + ": " + want.dump() + " -> " + got.dump();
  }
  if (want.type() != got.type() || want.size() != got.size() || (!want.is_structured() && want != got))
    return path + ": " + want.dump() + " -> " + got.dump();
  if (want.is_object())
    for (auto it = want.begin(); it != want.end(); ++it) {
      if (!got.contains(it.key())) return path + "." + it.key() + ": missing";
      if (auto d = json_difference(*it, got[it.key()], path + "." + it.key()); !d.empty()) return d;
    }
  if (want.is_array())
    for (std::size_t i = 0; i < want.size(); ++i)
      if (auto d = json_difference(want[i], got[i], path + "[" + std::to_string(i) + "]"); !d.empty())
        return d;
  return "";
}

}  // namespace refit::testing
