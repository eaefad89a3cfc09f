#pragma once
// Plans built by hand for the plan model's task builders, each tested alone: chunks of 1 MiB,
// rows of 1 KiB (512 bf16) of one tensor, on the test cluster (50 GB/s NICs, 15 us latency,
// 1500 GB/s copy engines).
#include <vector>

#include <gtest/gtest.h>

#include "quantize_work.h"
#include "refit/planner/plan.h"

namespace refit::sim::testing {

inline constexpr std::int64_t kMiB = 1 << 20;

// `mib` MiB of rows [row, row + mib) (in MiB) from `from` to `to`.
inline Transfer transfer(std::int32_t id, std::int32_t from, std::int32_t to, std::int64_t row,
                         std::int64_t mib, std::int32_t via = kFromSourceShard) {
  return Transfer{id,
                  Rank{from},
                  Rank{to},
                  LinkKind::kNetwork,
                  {Segment{0, Box{{row * 1024, 0}, {mib * 1024, 512}}, via}},
                  Bytes{mib * kMiB},
                  Bytes{kMiB}};
}

// A plan of one source and two destination ranks over a tensor of `rows_mib` MiB.
inline Plan plan_of(std::vector<Transfer> transfers, std::int64_t rows_mib) {
  Plan plan{.strategy = "hand",
            .tensors = {TensorSpec{.name = "w", .shape = {rows_mib * 1024, 512}}},
            .source_ranks = 1,
            .destination_ranks = 2,
            .transfers = std::move(transfers)};
  EXPECT_TRUE(validate_structure(plan));
  return plan;
}

// Nobody quantizes anything.
inline QuantizeWork no_quantization(const Plan& plan) {
  const auto ranks = static_cast<std::size_t>(plan.world_size());
  return QuantizeWork{
      .sender_order = {.weights = std::vector<std::vector<std::uint32_t>>(ranks),
                       .waits = std::vector<std::vector<lowering::QuantizeWait>>(plan.transfers.size())},
      .sender_boxes = std::vector<std::vector<QuantizeBytes>>(ranks),
      .receiver_bytes = std::vector<BytesPerScheme>(ranks),
      .before_receiver = std::vector<bool>(plan.transfers.size())};
}

}  // namespace refit::sim::testing
