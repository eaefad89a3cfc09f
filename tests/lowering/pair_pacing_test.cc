// PairPacing: the order a sender's pairs send in when they share links by their bytes, against
// the weighted fluid share the simulator models.
#include "refit/lowering/pair_pacing.h"

#include <numeric>
#include <random>

#include <gtest/gtest.h>

namespace refit::lowering {
namespace {

// Sends every chunk of every pair, always picking the pair PairPacing puts first; returns the
// pairs in the order they sent.
std::vector<std::size_t> paced_order(const std::vector<std::vector<std::int64_t>>& chunks) {
  std::vector<std::int64_t> totals;
  for (const auto& pair : chunks) {
    std::int64_t total = 0;
    for (const auto c : pair) total += c;
    totals.push_back(total);
  }
  PairPacing pacing(totals);
  std::vector<std::size_t> next(chunks.size(), 0);
  std::vector<std::size_t> order;
  for (;;) {
    std::size_t best = chunks.size();
    for (std::size_t p = 0; p < chunks.size(); ++p)
      if (next[p] < chunks[p].size() &&
          (best == chunks.size() || pacing.before(p, chunks[p][next[p]], best, chunks[best][next[best]])))
        best = p;
    if (best == chunks.size()) return order;
    pacing.sent(best, chunks[best][next[best]++]);
    order.push_back(best);
  }
}

TEST(PairPacing, PairsOfOneTwoAndFiveChunks) {
  // Chunks of 1 byte; a chunk's key is when it ends in the weighted share, as a fraction of the
  // pair: pair 0's only chunk 1/1, pair 1's 1/2 and 2/2, pair 2's 1/5 .. 5/5. Sorted (ties to the
  // lower pair): 2 (.2), 2 (.4), 1 (.5), 2 (.6), 2 (.8), 0 (1), 1 (1), 2 (1).
  const std::vector<std::size_t> want{2, 2, 1, 2, 2, 0, 1, 2};
  EXPECT_EQ(paced_order({{1}, {1, 1}, {1, 1, 1, 1, 1}}), want);
}

TEST(PairPacing, EveryChunkGoesByTheTimeTheWeightedFluidShareFinishesIt) {
  // The simulator's model: pair p a flow at rate C x total_p / total over one link of capacity
  // C, so the chunk that ends at byte b of pair p finishes at (b / total_p) x total / C. Sent one
  // at a time in PairPacing's order, it has gone once the link has carried every chunk up to it;
  // those all finish no later in the fluid share, so the link's bytes up to it are at most
  // total x b / total_p. Random pairs of random chunks.
  std::mt19937 rng(3);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::vector<std::int64_t>> chunks(std::uniform_int_distribution<std::size_t>(1, 8)(rng));
    std::int64_t total = 0;
    std::vector<std::int64_t> totals;
    for (auto& pair : chunks) {
      pair.resize(std::uniform_int_distribution<std::size_t>(1, 12)(rng));
      for (auto& c : pair) total += c = std::uniform_int_distribution<std::int64_t>(1, 1000)(rng);
      totals.push_back(std::accumulate(pair.begin(), pair.end(), std::int64_t{0}));
    }
    std::vector<std::int64_t> pair_done(chunks.size(), 0);
    std::vector<std::size_t> next(chunks.size(), 0);
    std::int64_t link_done = 0;
    for (const std::size_t p : paced_order(chunks)) {
      const auto c = chunks[p][next[p]++];
      pair_done[p] += c;
      link_done += c;
      const double fluid =
          static_cast<double>(total) * static_cast<double>(pair_done[p]) / static_cast<double>(totals[p]);
      EXPECT_LE(static_cast<double>(link_done), fluid * (1 + 1e-12)) << "trial " << trial << " pair " << p;
    }
  }
}

}  // namespace
}  // namespace refit::lowering
