// The fractional NIC balance against a brute force over unit-sized parts: splitting every class
// into parts of one unit and trying every (tx, rx) choice per part gives the integral optimum at
// that granularity, which lies within one part's time of the fractional optimum.
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include <gtest/gtest.h>

#include "nic_balance.h"

namespace refit::planner_detail {
namespace {

double makespan_of(const BalanceProblem& p, const std::vector<double>& tx, const std::vector<double>& rx) {
  double t = 0;
  for (std::size_t n = 0; n < tx.size(); ++n)
    t = std::max({t, tx[n] / p.tx_bandwidth[n], rx[n] / p.rx_bandwidth[n]});
  return t;
}

double brute_force(const BalanceProblem& p, double part) {
  std::vector<std::pair<std::size_t, double>> parts;  // (class, bytes)
  for (std::size_t c = 0; c < p.classes.size(); ++c)
    for (double left = p.classes[c].bytes; left > 0; left -= part)
      parts.emplace_back(c, std::min(part, left));
  auto tx = p.tx_fixed;
  auto rx = p.rx_fixed;
  double best = std::numeric_limits<double>::infinity();
  std::function<void(std::size_t)> go = [&](std::size_t k) {
    if (makespan_of(p, tx, rx) >= best) return;
    if (k == parts.size()) {
      best = makespan_of(p, tx, rx);
      return;
    }
    const auto& cl = p.classes[parts[k].first];
    for (auto a : cl.tx)
      for (auto b : cl.rx) {
        tx[static_cast<std::size_t>(a)] += parts[k].second;
        rx[static_cast<std::size_t>(b)] += parts[k].second;
        go(k + 1);
        tx[static_cast<std::size_t>(a)] -= parts[k].second;
        rx[static_cast<std::size_t>(b)] -= parts[k].second;
      }
  };
  go(0);
  return best;
}

TEST(NicBalance, OneClassOverTwoSendersSplitsInHalf) {
  // 8 MiB may leave through NIC 0 or 1 and enter through NIC 2: each sender takes half,
  // the receiver carries all of it: makespan = 8 MiB / 1 MB/s.
  BalanceProblem p{.tx_bandwidth = {1e6, 1e6, 1e6},
                   .rx_bandwidth = {1e6, 1e6, 1e6},
                   .tx_fixed = {0, 0, 0},
                   .rx_fixed = {0, 0, 0},
                   .classes = {FlowClass{.tx = {0, 1}, .rx = {2}, .bytes = 8 << 20}}};
  const auto r = balance_nic_load(p);
  EXPECT_NEAR(r.makespan_s, (8 << 20) / 1e6, 1e-3 * (8 << 20) / 1e6 + 1e-2);
  ASSERT_EQ(r.shares[0].tx.size(), 2u);
  EXPECT_NEAR(r.shares[0].tx[0].second + r.shares[0].tx[1].second, 8 << 20, 8192);
}

TEST(NicBalance, MatchesBruteForceOnRandomSmallInstances) {
  std::mt19937_64 rng(3);
  const double part = 64 * 4096.0;
  for (int i = 0; i < 60; ++i) {
    const std::size_t nics = 4;
    BalanceProblem p;
    for (std::size_t n = 0; n < nics; ++n) {
      p.tx_bandwidth.push_back(1e6 * static_cast<double>(1 + rng() % 3));
      p.rx_bandwidth.push_back(p.tx_bandwidth.back());
      p.tx_fixed.push_back(part * static_cast<double>(rng() % 2));
      p.rx_fixed.push_back(part * static_cast<double>(rng() % 2));
    }
    for (int c = 0; c < 3; ++c) {
      FlowClass cl;
      for (std::int32_t n = 0; n < 4; ++n) {
        if (rng() % 2) cl.tx.push_back(n);
        if (rng() % 2) cl.rx.push_back(n);
      }
      if (cl.tx.empty()) cl.tx.push_back(0);
      if (cl.rx.empty()) cl.rx.push_back(3);
      cl.bytes = part * static_cast<double>(1 + rng() % 3);
      p.classes.push_back(cl);
    }
    const auto r = balance_nic_load(p);
    const double brute = brute_force(p, part);
    const double part_time = part / 1e6;
    EXPECT_LE(r.makespan_s, brute * (1 + 2 * kBalanceTolerance) + 1e-9) << "case " << i;
    EXPECT_GE(r.makespan_s, brute - part_time - 1e-9) << "case " << i;
    // Shares cover each class and stay on candidate NICs.
    for (std::size_t c = 0; c < p.classes.size(); ++c) {
      double sum = 0;
      for (auto [nic, bytes] : r.shares[c].tx) {
        EXPECT_TRUE(std::ranges::find(p.classes[c].tx, nic) != p.classes[c].tx.end());
        sum += bytes;
      }
      EXPECT_NEAR(sum, p.classes[c].bytes, 4096);
    }
  }
}

}  // namespace
}  // namespace refit::planner_detail
