// The plan-level lowering: what a forwarding chunk waits for, checked element by element against
// where brute force finds each forwarded element in the upstream transfer; and the whole-plan
// copy costs the simulator charges, checked against the rank programs the executors run.
#include "refit/lowering/lowered_plan.h"

#include <gtest/gtest.h>

#include "forwarding_plans.h"
#include "random_problems.h"
#include "refit/lowering/plan_costs.h"
#include "refit/lowering/rank_program.h"
#include "refit/planner/strategy.h"
#include "strategy_names.h"
#include "test_cluster.h"

namespace refit::lowering {
namespace {

constexpr ZeroCopyRule kManyPuts{.max_runs = 16, .min_mean_run = Bytes{4096}};
constexpr ZeroCopyRule kOneRun{};

// The chunk of transfer `v` that carries element `point` of tensor `tensor`, by brute force.
std::int64_t chunk_carrying(const Plan& plan, const LoweredPlan& lowered, std::int32_t v,
                            std::uint32_t tensor, const Shape& point) {
  const Transfer& up = plan.transfers[static_cast<std::size_t>(v)];
  for (std::int32_t u = 0; u < static_cast<std::int32_t>(up.segments.size()); ++u) {
    const Segment& s = up.segments[static_cast<std::size_t>(u)];
    if (s.tensor != tensor || !s.box.contains_point(point)) continue;
    const auto& layout = lowered.layout(v);
    return layout.chunk_of(layout.segment_offset(u) + row_major_index(s.box, point) * layout.element_size(u));
  }
  return -1;
}

// Forwarding strategies (refit's domain-to-domain relays, gather-broadcast's rings of whole
// tensors gathered from shards): each wait is exactly one past the latest upstream chunk that
// carries an element the chunk forwards.
TEST(LoweredPlan, ForwardingChunksWaitForExactlyTheChunksCarryingTheirElements) {
  refit::testing::RandomProblems random(5);
  std::int64_t checked = 0;
  for (const char* strategy : {"refit", "gather-broadcast"})
    for (int i = 0; i < 25; ++i) {
      const auto plan = testing::forwarding_plan(random, strategy);
      const auto lowered = LoweredPlan::make(plan, Bytes{96}).value();
      for (const Transfer& t : plan.transfers)
        for (std::int64_t k = 0; k < lowered.layout(t.id).chunks(); ++k) {
          std::vector<ChunkWait> expected;
          for (const Piece& p : lowered.layout(t.id).pieces(k)) {
            const Segment& s = t.segments[static_cast<std::size_t>(p.segment)];
            if (s.via == kFromSourceShard) continue;
            std::int64_t latest = -1;
            for (std::int64_t e = p.first; e < p.first + p.count; ++e)
              latest = std::max(latest, chunk_carrying(plan, lowered, s.via, s.tensor, point_at(s.box, e)));
            ASSERT_GE(latest, 0);
            auto it = std::ranges::find(expected, s.via, &ChunkWait::transfer);
            if (it == expected.end())
              expected.push_back(ChunkWait{.transfer = s.via, .chunks = latest + 1});
            else
              it->chunks = std::max(it->chunks, latest + 1);
          }
          const auto waits = lowered.waits(t.id, k).value();
          EXPECT_EQ(waits, expected) << strategy << " problem " << i << " transfer " << t.id << " chunk "
                                     << k;
          checked += static_cast<std::int64_t>(waits.size());
        }
    }
  EXPECT_GT(checked, 100);
}

// upstream_needs() by brute force: per upstream, the most any chunk's waits() asks of it, and the
// first chunk asking that much.
std::vector<LoweredPlan::UpstreamNeed> needs_by_chunk(const LoweredPlan& lowered, std::int32_t t) {
  std::vector<LoweredPlan::UpstreamNeed> out;
  for (std::int64_t k = 0; k < lowered.layout(t).chunks(); ++k) {
    const auto waits = lowered.waits(t, k).value();
    for (const auto& w : waits) {
      auto it = std::ranges::find(out, w.transfer, &LoweredPlan::UpstreamNeed::transfer);
      if (it == out.end())
        out.push_back({.transfer = w.transfer, .chunks = w.chunks, .at = k});
      else if (w.chunks > it->chunks)
        *it = {.transfer = w.transfer, .chunks = w.chunks, .at = k};
    }
  }
  return out;
}

void expect_needs_by_chunk(const LoweredPlan& lowered, const Plan& plan, const std::string& what) {
  for (const Transfer& t : plan.transfers) {
    if (t.quantizes()) continue;
    auto needs = lowered.upstream_needs(t.id).value();
    auto expected = needs_by_chunk(lowered, t.id);
    std::ranges::sort(needs, {}, &LoweredPlan::UpstreamNeed::transfer);
    std::ranges::sort(expected, {}, &LoweredPlan::UpstreamNeed::transfer);
    EXPECT_EQ(needs, expected) << what << " transfer " << t.id;
  }
}

TEST(LoweredPlan, WhatARelayNeedsMostOfEachUpstreamIsWhatItsChunksWaitFor) {
  refit::testing::RandomProblems random(9);
  for (const char* strategy : {"refit", "gather-broadcast", "m2n-ring"})
    for (int i = 0; i < 20; ++i) {
      const auto plan = testing::forwarding_plan(random, strategy);
      expect_needs_by_chunk(LoweredPlan::make(plan, Bytes{96}).value(), plan,
                            std::string(strategy) + " problem " + std::to_string(i));
    }
}

TEST(LoweredPlan, ARelayAcrossColumnHalvesNeedsMostFromTheFirstChunkReadingTheUpstreamsLast) {
  // w [64, 16] bf16 (rows of 32 bytes). Rank 0 sends rank 1 w's right column half, then its left
  // half, in chunks of 256 bytes (8 rows of a half): the left half's rows 48-63 are the
  // upstream's 8th and last chunk. Rank 1 forwards all of w, row by row, in chunks of 16 bytes
  // (half a row): relay chunk 2r is row r's left half, 2r + 1 its right half. The most, 8
  // chunks, is first needed by relay chunk 96 (row 48's left half), though the left half's last
  // element comes in chunk 126 and chunk 125 (a right half) needs only 4.
  const Plan plan{.strategy = "hand",
                  .tensors = {TensorSpec{.name = "w", .shape = {64, 16}}},
                  .source_ranks = 1,
                  .destination_ranks = 2,
                  .transfers = {Transfer{0,
                                         Rank{0},
                                         Rank{1},
                                         LinkKind::kNetwork,
                                         {Segment{0, Box{{0, 8}, {64, 8}}, kFromSourceShard},
                                          Segment{0, Box{{0, 0}, {64, 8}}, kFromSourceShard}},
                                         Bytes{2048},
                                         Bytes{256}},
                                Transfer{1,
                                         Rank{1},
                                         Rank{2},
                                         LinkKind::kNetwork,
                                         {Segment{0, Box{{0, 0}, {64, 16}}, 0}},
                                         Bytes{2048},
                                         Bytes{16}}}};
  ASSERT_TRUE(validate_structure(plan));
  const auto lowered = LoweredPlan::make(plan, Bytes{4096}).value();
  ASSERT_EQ(lowered.layout(0).chunks(), 8);
  ASSERT_EQ(lowered.layout(1).chunks(), 128);
  EXPECT_EQ(lowered.upstream_needs(1).value(),
            (std::vector<LoweredPlan::UpstreamNeed>{{.transfer = 0, .chunks = 8, .at = 96}}));
  expect_needs_by_chunk(lowered, plan, "column halves");
}

// copy_costs() decides for every rank at once what lower_rank() decides for one: the same packs
// and unpacks, and the same bytes at the first and last chunk.
TEST(LoweredPlan, CountingChunksGivesWhatCuttingThemGives) {
  // Random problems, every strategy, chunk sizes that are and are not multiples of the element
  // sizes and staging that cuts finer than the plan: the count without materialising equals the
  // lowered plan's.
  refit::testing::RandomProblems random(17);
  for (const auto strategy : strategy_names())
    for (int i = 0; i < 10; ++i) {
      const auto src = static_cast<std::int32_t>(random.uniform(1, 4));
      const auto dst = static_cast<std::int32_t>(random.uniform(1, 4));
      const auto problem = random.problem(src, dst, 3, 40);
      const auto cluster = refit::testing::make_test_cluster((src + dst + 1) / 2, 2, src, dst);
      const Bytes chunk{random.uniform(16, 300)};
      const auto plan = make_plan(strategy, problem, cluster, PlanOptions{.chunk = chunk}).value();
      for (const Bytes staging : {Bytes{1 << 20}, Bytes{2 * kAlign + random.uniform(0, 200)}})
        EXPECT_EQ(LoweredPlan::count_chunks(plan, staging), LoweredPlan::make(plan, staging).value().chunks())
            << strategy << " chunk " << chunk.value << " staging " << staging.value;
    }
}

TEST(CopyCosts, AreTheRankProgramsDecisions) {
  refit::testing::RandomProblems random(9);
  for (const auto strategy : strategy_names())
    for (int i = 0; i < 15; ++i) {
      const auto src = static_cast<std::int32_t>(random.uniform(1, 4));
      const auto dst = static_cast<std::int32_t>(random.uniform(1, 4));
      const auto problem = random.problem(src, dst, 3, 40);
      const auto cluster = refit::testing::make_test_cluster((src + dst + 1) / 2, 2, src, dst);
      const auto plan = make_plan(strategy, problem, cluster, PlanOptions{.chunk = Bytes{256}}).value();
      const auto lowered = LoweredPlan::make(plan, Bytes{1 << 20}).value();
      for (const auto& rule : {kManyPuts, kOneRun}) {
        const auto costs = copy_costs(lowered, problem, rule).value();
        std::vector<TransferCopyCost> expected(plan.transfers.size());
        for (std::int32_t r = 0; r < plan.world_size(); ++r) {
          const auto program = lower_rank(lowered, Rank{r}, shards_of(problem, Rank{r}), rule).value();
          for (const auto& s : program.sends()) {
            auto& c = expected[static_cast<std::size_t>(s.transfer)];
            for (std::size_t k = 0; k < s.chunks.size(); ++k)
              if (s.chunks[k].path == CopyPath::kStaged) {
                c.packs = true;
                if (k == 0) c.pack_first = Bytes{s.chunks[k].bytes};
              }
          }
          for (const auto& rc : program.receives()) {
            auto& c = expected[static_cast<std::size_t>(rc.transfer)];
            const auto& last = rc.chunks.back();
            c.unpacks = rc.extracts || std::ranges::any_of(rc.chunks, [](const ChunkCopy& x) {
                          return x.path == CopyPath::kStaged;
                        });
            if (rc.extracts || last.path == CopyPath::kStaged) c.unpack_last = Bytes{last.bytes};
          }
        }
        for (std::size_t t = 0; t < costs.size(); ++t) {
          EXPECT_EQ(costs[t].packs, expected[t].packs) << strategy << " " << i << " transfer " << t;
          EXPECT_EQ(costs[t].unpacks, expected[t].unpacks) << strategy << " " << i << " transfer " << t;
          EXPECT_EQ(costs[t].pack_first, expected[t].pack_first) << strategy << " " << i << " transfer " << t;
          EXPECT_EQ(costs[t].unpack_last, expected[t].unpack_last)
              << strategy << " " << i << " transfer " << t;
        }
      }
    }
}

TEST(LoweredPlan, RefusesToMaterialiseMoreChunksThanItsCap) {
  // One transfer of 2^33 bytes (2^32 bf16 elements) in 16-byte chunks (the smallest the lowering
  // cuts): 2^29 chunks, a valid plan (at most 2^34 described) that the lowering, which
  // materialises each, refuses before cutting (2^28 at most); in 1 MiB chunks it is 8192.
  const Shape shape{std::int64_t{1} << 32};
  Plan plan{.strategy = "hand",
            .tensors = {make_tensor_spec("w", shape, DType::kBF16).value()},
            .source_ranks = 1,
            .destination_ranks = 1,
            .transfers = {Transfer{.id = 0,
                                   .sender = Rank{0},
                                   .receiver = Rank{1},
                                   .link = LinkKind::kNetwork,
                                   .segments = {Segment{.tensor = 0, .box = Box{{0}, shape}}},
                                   .bytes = Bytes{std::int64_t{1} << 33},
                                   .chunk = Bytes{16}}}};
  ASSERT_TRUE(validate_structure(plan));
  const auto refused = LoweredPlan::make(plan, kDefaultStaging);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kOutOfRange);
  EXPECT_NE(refused.error().message.find("choose a larger chunk"), std::string::npos)
      << refused.error().message;
  plan.transfers[0].chunk = Bytes{1 << 20};
  EXPECT_EQ(LoweredPlan::make(plan, kDefaultStaging).value().chunks(), 8192);
}

}  // namespace
}  // namespace refit::lowering
