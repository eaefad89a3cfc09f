// holder_share and the balance by parts: what keeps (sender, receiver) pairs linear in the GPUs
// without giving up the NIC balance.
#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "balance_parts.h"
#include "refit_pieces.h"

namespace refit::planner_detail {
namespace {

TEST(HolderShare, EveryHolderCoversTheSameWidthOfCopies) {
  // Copy g of G covers [g*h/G, (g+1)*h/G) of the holder line; a holder i may serve copy g iff
  // its slot [i, i+1) meets that interval. Brute force over h, G <= 24: the ranges are exactly
  // those holders, contiguous, and every holder is met (the fractional assignment that gives each
  // holder G/h copies stays feasible).
  for (std::size_t h = 1; h <= 24; ++h)
    for (std::size_t copies = 1; copies <= 24; ++copies) {
      std::vector<int> met(h, 0);
      for (std::size_t g = 0; g < copies; ++g) {
        const auto [first, last] = holder_share(h, g, copies);
        for (std::size_t i = 0; i < h; ++i) {
          // [i, i+1) meets [g*h/G, (g+1)*h/G), scaled by G: i*G < (g+1)*h and (i+1)*G > g*h.
          const bool meets = i * copies < (g + 1) * h && (i + 1) * copies > g * h;
          EXPECT_EQ(meets, i >= first && i < last)
              << "h " << h << " G " << copies << " g " << g << " i " << i;
          met[i] += meets;
        }
      }
      EXPECT_TRUE(std::ranges::all_of(met, [](int m) { return m > 0; })) << "h " << h << " G " << copies;
    }
}

TEST(HolderShare, MoreCopiesThanHoldersGiveEachCopyOneHolderWhenTheyDivide) {
  // 8 holders, 64 copies (engines): copies 8k..8k+7 all take holder k, one holder each.
  for (std::size_t g = 0; g < 64; ++g) EXPECT_EQ(holder_share(8, g, 64), std::pair(g / 8, g / 8 + 1));
  // 32 holders (16 ranks of 2 replicas), 16 copies: copy g takes holders 2g and 2g+1.
  for (std::size_t g = 0; g < 16; ++g) EXPECT_EQ(holder_share(32, g, 16), std::pair(2 * g, 2 * g + 2));
}

TEST(BalanceByParts, MatchesTheWholeBalanceAndSolvesEqualPartsAlike) {
  // Two replicas of one random instance on NICs 0..3 and 4..7 (no class spans both): the
  // makespan is the whole problem's (to the search's tolerance), and the second part's shares
  // are the first's moved by 4 NICs, byte for byte.
  std::mt19937_64 rng(5);
  for (int i = 0; i < 30; ++i) {
    BalanceProblem p;
    for (int copy = 0; copy < 2; ++copy)
      for (int n = 0; n < 4; ++n) {
        const double bw = 1e9 * static_cast<double>(1 + (copy == 0 ? rng() % 3 : 0));
        p.tx_bandwidth.push_back(copy == 0 ? bw : p.tx_bandwidth[static_cast<std::size_t>(n)]);
        p.rx_bandwidth.push_back(p.tx_bandwidth.back());
        p.tx_fixed.push_back(copy == 0 ? 1e6 * static_cast<double>(rng() % 4)
                                       : p.tx_fixed[static_cast<std::size_t>(n)]);
        p.rx_fixed.push_back(copy == 0 ? 1e6 * static_cast<double>(rng() % 4)
                                       : p.rx_fixed[static_cast<std::size_t>(n)]);
      }
    std::vector<FlowClass> first;
    for (int c = 0; c < 4; ++c) {
      FlowClass cl{.tx = {0, 1}, .rx = {2, 3}, .bytes = 1e6 * static_cast<double>(1 + rng() % 8)};
      if (rng() % 2) cl.tx = {0, 1, 2};
      first.push_back(cl);
    }
    p.classes = first;
    for (auto cl : first) {
      for (auto& n : cl.tx) n += 4;
      for (auto& n : cl.rx) n += 4;
      p.classes.push_back(cl);
    }
    const auto whole = balance_nic_load(p);
    const auto parts = balance_nic_load_by_parts(p);
    EXPECT_NEAR(parts.makespan_s, whole.makespan_s, 2 * kBalanceTolerance * whole.makespan_s) << "case " << i;
    for (std::size_t c = 0; c < first.size(); ++c) {
      auto moved = parts.shares[c];
      for (auto& [nic, bytes] : moved.tx) nic += 4;
      for (auto& [nic, bytes] : moved.rx) nic += 4;
      EXPECT_EQ(moved.tx, parts.shares[c + first.size()].tx) << "case " << i;
      EXPECT_EQ(moved.rx, parts.shares[c + first.size()].rx) << "case " << i;
    }
  }
}

}  // namespace
}  // namespace refit::planner_detail
