// PlanBuilder's message index against a brute-force map: segments with equal (phase, key, from,
// to) travel in one message, and a combination not seen before opens the next handle.
#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "plan_builder.h"
#include "refit/planner/links.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit::planner_detail {
namespace {

using testing::make_layout;
using testing::make_reshard;
using testing::make_test_cluster;
using testing::rank_range;

// One bf16 tensor w of `shape`: `sources` ranks from 0 hold it as `source` places it, and the
// `destinations` ranks after them as `destination` does.
ReshardProblem one_tensor(const Shape& shape, std::int32_t sources, const char* source,
                          std::int32_t destinations, const char* destination) {
  return ReshardProblem::make(
             {make_reshard(
                 "w", shape, make_layout(shape, {sources}, rank_range(0, sources), source),
                 make_layout(shape, {destinations}, rank_range(sources, destinations), destination))},
             sources, destinations)
      .value();
}

// The row halves of w [256, 64].
const Box kTop{.offset = {0, 0}, .extent = {128, 64}};
const Box kBottom{.offset = {128, 0}, .extent = {128, 64}};

TEST(PlanBuilder, FindsEachMessageAsABruteForceMapDoes) {
  const auto problem = one_tensor({64, 8}, 4, "S0", 4, "S0");
  const auto cluster = make_test_cluster(2, 4, 4, 4);
  PlanBuilder builder(problem, cluster, strategy_info(StrategyId::kRefit), Bytes{1 << 20});
  // Expected: handle = the number of distinct (phase, key, from, to) seen before this one's first
  // add; the draws repeat keys (3 x 40 x 8 x 8 small ones) and add rare large ones, thousands in
  // all, so the index grows many times over.
  std::map<std::tuple<std::uint32_t, std::uint64_t, std::int32_t, std::int32_t>, Handle> reference;
  std::mt19937_64 rng(31);
  const Box row{.offset = {0, 0}, .extent = {1, 8}};
  for (int i = 0; i < 20000; ++i) {
    const auto phase = static_cast<std::uint32_t>(rng() % 3);
    const std::uint64_t key = rng() % 8 == 0 ? rng() : rng() % 40;
    const auto from = static_cast<std::int32_t>(rng() % 8);
    const auto to = static_cast<std::int32_t>(rng() % 8);
    const auto [it, fresh] =
        reference.try_emplace({phase, key, from, to}, static_cast<Handle>(reference.size()));
    ASSERT_EQ(builder.add(phase, key, Rank{from}, Rank{to}, 0, row), it->second) << "draw " << i;
    EXPECT_EQ(builder.receiver(it->second), Rank{to});
  }
  EXPECT_GT(reference.size(), 5000u);
}

TEST(PlanBuilder, ARelayOthersForwardFromFollowsEveryUpstreamAsItsDataLands) {
  // Ranks 0 and 1 hold the two row halves of w [256, 64] bf16 (16 KiB each); rank 2 takes both
  // and forwards them to rank 3, which forwards them to rank 4 (refit's keys: a relay per
  // upstream message). Chunks of 1 KiB, so slices of kRelaySliceChunks = 4 KiB. The pairs 0->2
  // and 1->2 carry 16 KiB each at once, so the k-th 4 KiB of either lands before the (k+1)-th of
  // the other: the pair 2->3 must take slices of both halves in turn instead of all of one half
  // (16 chunks at the share of one sender) before the other, and each relay 3->4 must read one
  // slice of 2->3 (a relay reading several waits for all of them).
  const Shape shape{256, 64};
  const auto problem = one_tensor(shape, 2, "S0", 3, "R");
  const auto cluster = make_test_cluster(5, 1, 2, 3);
  const Bytes chunk{1024};
  PlanBuilder builder(problem, cluster, strategy_info(StrategyId::kRefit), chunk);
  for (const auto& [source, half] : {std::pair(0, kTop), std::pair(1, kBottom)}) {
    const Handle landed = builder.add(0, 0, Rank{source}, Rank{2}, 0, half);
    const Handle relayed =
        builder.add(1, static_cast<std::uint64_t>(landed) + 2, Rank{2}, Rank{3}, 0, half, landed);
    builder.add(2, static_cast<std::uint64_t>(relayed), Rank{3}, Rank{4}, 0, half, relayed);
  }
  const auto plan = std::move(builder).finish(PlanBuilder::RelayOrder::kArrival);
  const auto valid = validate(plan, problem);
  ASSERT_TRUE(valid) << valid.error().message;

  // The upstream sender of each 2->3 transfer, in plan order; each reads a single upstream.
  std::vector<std::int32_t> upstream_sender;
  for (const auto& t : plan.transfers) {
    if (t.sender != Rank{2}) continue;
    std::set<std::int32_t> vias;
    for (const auto& s : t.segments) vias.insert(s.via);
    ASSERT_EQ(vias.size(), 1u) << "transfer " << t.id;
    EXPECT_LE(t.bytes.value, PlanBuilder::kRelaySliceChunks * chunk.value) << "transfer " << t.id;
    upstream_sender.push_back(plan.transfers[static_cast<std::size_t>(*vias.begin())].sender.value);
  }
  ASSERT_GE(upstream_sender.size(), 8u);  // 32 KiB in slices of at most 4 KiB
  EXPECT_NE(upstream_sender[0], upstream_sender[1]) << "the pair 2->3 relays one half before the other";

  for (const auto& t : plan.transfers) {
    if (t.sender != Rank{3}) continue;
    std::set<std::int32_t> vias;
    for (const auto& s : t.segments) vias.insert(s.via);
    EXPECT_EQ(vias.size(), 1u) << "transfer " << t.id << " reads several slices";
  }
}

TEST(PlanBuilder, WhatOtherDomainsForwardLeadsWhatOnlyNvlinkForwardsInItsPairsStream) {
  // Rank 0 sends rank 1 (one NVLink domain) w's top half, which rank 1 passes on to rank 2 in
  // the same domain, then its bottom half, which rank 1 sends on to rank 3 in the other domain.
  // Both land at once (from a source shard), so the pair 0->1 sends the bottom first: rank 3 waits
  // over the network, the slowest link, while rank 2 takes the top over NVLink as soon as it lands.
  // In the order they were made, the network relay waited for all of the top half.
  const Shape shape{256, 64};
  const auto problem = one_tensor(shape, 1, "R", 3, "R");
  const auto cluster = make_test_cluster(2, 3, 1, 3);
  ASSERT_EQ(link_between(cluster, Rank{1}, Rank{2}), LinkKind::kNvlink);
  ASSERT_EQ(link_between(cluster, Rank{1}, Rank{3}), LinkKind::kNetwork);
  PlanBuilder builder(problem, cluster, strategy_info(StrategyId::kRefit), Bytes{1024});
  const Handle to_domain = builder.add(0, 0, Rank{0}, Rank{1}, 0, kTop);
  const Handle to_network = builder.add(0, 1, Rank{0}, Rank{1}, 0, kBottom);
  builder.add(1, 0, Rank{1}, Rank{2}, 0, kTop, to_domain);
  builder.add(1, 1, Rank{1}, Rank{3}, 0, kBottom, to_network);
  const auto plan = std::move(builder).finish(PlanBuilder::RelayOrder::kArrival);

  std::vector<std::int64_t> first_rows;  // of the pair 0->1's messages, in plan order
  for (const auto& t : plan.transfers)
    if (t.sender == Rank{0} && t.receiver == Rank{1}) first_rows.push_back(t.segments.front().box.offset[0]);
  ASSERT_FALSE(first_rows.empty());
  EXPECT_EQ(first_rows.front(), 128) << "the half rank 3 waits for over the network goes first";
}

TEST(PlanBuilder, WhatOthersForwardGoesInChunksOfAFewPercentOfItsPair) {
  // Rank 0 sends rank 1 rows [0, 16) MiB of w (bf16, rows of 1 KiB), which rank 1 forwards to
  // rank 2, and rank 2 rows [16, 48) MiB, which nobody forwards; the plan's
  // chunk is 8 MiB. Its pair carrying 16 MiB, the forwarded message goes in chunks of
  // max(16 MiB / kForwardedChunks = 0.5 MiB, kMinForwardedChunk = 1 MiB) = 1 MiB, and so does
  // its relay, whose chunks wait for the ones they forward: the relay starts once 1 MiB has
  // landed instead of 8. The message that only lands keeps the plan's chunk.
  static_assert(PlanBuilder::kForwardedChunks == 32 && PlanBuilder::kMinForwardedChunk == 1 << 20);
  const std::int64_t mib = 1 << 20;
  const Shape shape{48 * 1024, 512};
  const auto problem = one_tensor(shape, 1, "R", 2, "R");
  const auto cluster = make_test_cluster(3, 1, 1, 2);
  PlanBuilder builder(problem, cluster, strategy_info(StrategyId::kRefit), Bytes{8 * mib});
  const Box forwarded{.offset = {0, 0}, .extent = {16 * 1024, 512}};
  const Box landing{.offset = {16 * 1024, 0}, .extent = {32 * 1024, 512}};
  const Handle to_relay = builder.add(0, 0, Rank{0}, Rank{1}, 0, forwarded);
  builder.add(1, 2, Rank{1}, Rank{2}, 0, forwarded, to_relay);
  builder.add(0, 0, Rank{0}, Rank{2}, 0, landing);
  const auto plan = std::move(builder).finish(PlanBuilder::RelayOrder::kArrival);

  ASSERT_EQ(plan.transfers.size(), 3u);
  for (const auto& t : plan.transfers) {
    const bool lands_only = t.sender == Rank{0} && t.receiver == Rank{2};
    EXPECT_EQ(t.chunk.value, lands_only ? 8 * mib : mib)
        << "transfer " << t.id << ": " << t.sender.value << "->" << t.receiver.value;
  }
}

TEST(PlanBuilder, ARelayOfPartOfASlicedMessageReadsOneSliceAPart) {
  // Rank 0 holds w [256, 64] bf16 (32 KiB); rank 1 takes it and relays it all to rank 2 (32 KiB,
  // cut into 4 KiB slices: 32 rows each), which relays rows [16, 48) to rank 3 in one message
  // and the other rows in another. Rows [16, 48) straddle the slices [0, 32) and [32, 64), so
  // that relay is cut at row 32 and each part reads the one slice that holds it.
  const Shape shape{256, 64};
  const auto problem = one_tensor(shape, 1, "R", 3, "R");
  const auto cluster = make_test_cluster(4, 1, 1, 3);
  PlanBuilder builder(problem, cluster, strategy_info(StrategyId::kRefit), Bytes{1024});
  const Box whole{.offset = {0, 0}, .extent = {256, 64}};
  const Handle landed = builder.add(0, 0, Rank{0}, Rank{1}, 0, whole);
  const Handle relayed = builder.add(1, 2, Rank{1}, Rank{2}, 0, whole, landed);
  builder.add(2, 0, Rank{2}, Rank{3}, 0, Box{.offset = {16, 0}, .extent = {32, 64}}, relayed);
  builder.add(2, 1, Rank{2}, Rank{3}, 0, Box{.offset = {0, 0}, .extent = {16, 64}}, relayed);
  builder.add(2, 1, Rank{2}, Rank{3}, 0, Box{.offset = {48, 0}, .extent = {208, 64}}, relayed);
  const auto plan = std::move(builder).finish(PlanBuilder::RelayOrder::kArrival);
  const auto valid = validate(plan, problem);
  ASSERT_TRUE(valid) << valid.error().message;
  std::size_t read = 0;
  for (const auto& t : plan.transfers) {
    if (t.sender != Rank{2}) continue;
    for (const auto& seg : t.segments) {
      const auto& upstream = plan.transfers[static_cast<std::size_t>(seg.via)];
      EXPECT_EQ(upstream.sender, Rank{1});
      EXPECT_TRUE(
          std::ranges::any_of(upstream.segments, [&](const Segment& u) { return u.box.contains(seg.box); }))
          << "transfer " << t.id << " reads " << seg.box.to_string() << " from a slice that does not hold it";
      read += static_cast<std::size_t>(seg.box.volume());
    }
  }
  EXPECT_EQ(read, 256u * 64u);
  const auto slices =
      std::ranges::count_if(plan.transfers, [](const Transfer& t) { return t.sender == Rank{1}; });
  EXPECT_GE(slices, 8);  // 32 KiB in slices of at most 4 KiB
}

}  // namespace
}  // namespace refit::planner_detail
