#pragma once
// Lookups the storage-map tests share: a problem's tensor by name, a rank's parameter by name
// (each a test failure when missing).
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "refit/core/problem.h"
#include "refit/models/storage_map.h"

namespace refit::models::testing {

inline std::uint32_t index_of(const ReshardProblem& p, const std::string& name) {
  for (std::uint32_t i = 0; i < p.tensors().size(); ++i)
    if (p.tensors()[i].tensor.name == name) return i;
  ADD_FAILURE() << name;
  return 0;
}

inline const FrameworkParameter& parameter(const RankStorage& r, const std::string& name) {
  for (const auto& p : r.parameters)
    if (p.name == name) return p;
  ADD_FAILURE() << name;
  return r.parameters.front();
}

}  // namespace refit::models::testing
