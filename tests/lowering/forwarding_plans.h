#pragma once
// Random plans in which ranks forward: 1-2 source and 2-5 destination ranks of a random problem on
// domains of 2 GPUs with 10 GB/s NICs, in chunks of 40 bytes, so that messages are cut mid-row and
// relays wait on chunks of their upstreams.
#include <string_view>

#include "random_problems.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"

namespace refit::lowering::testing {

inline Plan forwarding_plan(refit::testing::RandomProblems& random, std::string_view strategy) {
  const auto src = static_cast<std::int32_t>(random.uniform(1, 3));
  const auto dst = static_cast<std::int32_t>(random.uniform(2, 6));
  const auto problem = random.problem(src, dst);
  const auto cluster = refit::testing::make_test_cluster((src + dst + 1) / 2, 2, src, dst, 10);
  return make_plan(strategy, problem, cluster, PlanOptions{.chunk = Bytes{40}}).value();
}

}  // namespace refit::lowering::testing
