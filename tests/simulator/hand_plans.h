#pragma once
// Plans built by hand for closed-form simulation tests: 1 MiB chunks of bf16 rows of 1 KiB, on
// the test cluster's 50 GB/s NICs: U = 1 MiB / NIC bandwidth, alpha = network latency.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "refit/planner/plan.h"
#include "test_problems.h"

namespace refit::testing {

inline constexpr double kNicBw = 50e9;
inline constexpr double kAlpha = 15e-6;
inline constexpr std::int64_t kMiB = 1 << 20;
inline constexpr double kU = kMiB / kNicBw;
inline constexpr std::int64_t kCols = 512;  // bf16 rows of 1 KiB: 1024 rows make 1 MiB

inline Transfer transfer(std::int32_t id, std::int32_t from, std::int32_t to, std::uint32_t tensor,
                         std::int64_t row, std::int64_t mib, std::int32_t via = kFromSourceShard) {
  return Transfer{id,
                  Rank{from},
                  Rank{to},
                  LinkKind::kNetwork,
                  {Segment{tensor, Box{{row * 1024, 0}, {mib * 1024, kCols}}, via}},
                  Bytes{mib * kMiB},
                  Bytes{kMiB}};
}

inline Plan plan_of(const ReshardProblem& p, std::vector<Transfer> transfers) {
  Plan plan{.strategy = "hand",
            .source_ranks = p.source_ranks(),
            .destination_ranks = p.destination_ranks(),
            .transfers = std::move(transfers)};
  for (const auto& t : p.tensors()) plan.tensors.push_back(t.tensor);
  EXPECT_TRUE(validate(plan, p)) << validate(plan, p).error().message;
  return plan;
}

// Tensor `name` of `mib` MiB, whole on source rank `from`, replicated on the ranks `to`.
inline TensorReshard replicated(std::string name, std::int64_t mib, std::int32_t from, std::vector<Rank> to) {
  const Shape shape{mib * 1024, kCols};
  const auto n = static_cast<std::int64_t>(to.size());
  return make_reshard(std::move(name), shape, make_layout(shape, {1}, rank_range(from, 1), "R"),
                      make_layout(shape, {n}, std::move(to), "R"));
}

}  // namespace refit::testing
