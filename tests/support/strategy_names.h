#pragma once
// The names of every strategy, from the strategy table, for tests that run them all.
#include <string_view>
#include <vector>

#include "refit/planner/strategy.h"

namespace refit {

inline std::vector<std::string_view> strategy_names() {
  std::vector<std::string_view> out;
  for (const auto& s : strategies()) out.push_back(s.name);
  return out;
}

}  // namespace refit
