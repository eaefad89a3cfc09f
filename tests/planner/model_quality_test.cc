// Plan quality on the reference problem, DeepSeek-V3 Megatron PP16xEP16 (256 GPUs) ->
// vLLM TP32xDP8 (256 GPUs) on dgx-h100.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "model_problems.h"
#include "refit/planner/plan_stats.h"
#include "refit/planner/strategy.h"

namespace refit {
namespace {

class DeepSeekPlan : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    mp_ = new testing::ModelProblem(
        testing::model_problem("deepseek-v3", "pp=16,ep=16", "tp=32,engines=8", "dgx-h100"));
    plan_ = new Plan(make_plan("refit", mp_->problem, mp_->cluster).value());
  }
  static void TearDownTestSuite() {
    delete plan_;
    delete mp_;
  }
  static testing::ModelProblem* mp_;
  static Plan* plan_;
};
testing::ModelProblem* DeepSeekPlan::mp_ = nullptr;
Plan* DeepSeekPlan::plan_ = nullptr;

TEST_F(DeepSeekPlan, Validates) {
  const auto ok = validate(*plan_, mp_->problem);
  EXPECT_TRUE(ok) << ok.error().message;
}

TEST_F(DeepSeekPlan, EachDomainReceivesExactlyTheUniqueBytesItNeeds) {
  // No training GPU shares a domain with an inference GPU, so every byte a domain needs must
  // enter it over the network, and refit brings each (piece, domain) in exactly once.
  const auto stats = compute_stats(*plan_, mp_->cluster);
  const auto lb = lower_bound(mp_->problem, mp_->cluster);
  ASSERT_EQ(stats.domain_ingress.size(), lb.domain_need.size());
  std::int64_t needing = 0;
  for (std::size_t d = 0; d < lb.domain_need.size(); ++d) {
    EXPECT_EQ(stats.domain_ingress[d], lb.domain_need[d]) << "domain " << d;
    needing += lb.domain_need[d].value > 0;
  }
  EXPECT_EQ(needing, 32);  // the 32 inference nodes
}

TEST_F(DeepSeekPlan, BusiestNicWithinFivePercentOfTheOptimum) {
  // The fractional optimum can be no better than the lower bound, so a busiest NIC within 5 %
  // of the lower bound is within 5 % of the optimum. 400G NICs: 47 GB/s effective.
  const auto stats = compute_stats(*plan_, mp_->cluster);
  const auto lb = lower_bound(mp_->problem, mp_->cluster);
  const double bw = mp_->cluster.cluster().nics()[0].bandwidth.value;
  const double busiest = static_cast<double>(std::max(stats.max_nic_tx, stats.max_nic_rx).value) / bw;
  EXPECT_LE(busiest, 1.05 * lb.time.value);
}

TEST_F(DeepSeekPlan, NeverMoreNetworkBytesThanDirect) {
  const auto direct = make_plan("direct", mp_->problem, mp_->cluster).value();
  EXPECT_LE(compute_stats(*plan_, mp_->cluster).network_bytes,
            compute_stats(direct, mp_->cluster).network_bytes);
}

// When each segment of each transfer has landed, as a fraction of the time its pair takes: the
// pair is one in-order stream and pairs share links by their bytes (refit's execution model), so
// every pair goes through the same fraction of its bytes at once: its bytes up to the segment's
// end over all of its bytes.
std::vector<std::vector<double>> segment_landings(const Plan& plan) {
  std::map<std::pair<std::int32_t, std::int32_t>, std::int64_t> total;
  for (const auto& t : plan.transfers) total[{t.sender.value, t.receiver.value}] += t.bytes.value;
  std::map<std::pair<std::int32_t, std::int32_t>, std::int64_t> carried;
  std::vector<std::vector<double>> landed(plan.transfers.size());
  for (const auto& t : plan.transfers) {
    const std::pair key{t.sender.value, t.receiver.value};
    auto& pair = carried[key];
    for (const auto& s : t.segments)
      landed[static_cast<std::size_t>(t.id)].push_back(
          static_cast<double>(pair += plan.segment_bytes(s).value) / static_cast<double>(total[key]));
  }
  return landed;
}

TEST_F(DeepSeekPlan, RelaysGoInTheOrderTheirDataLands) {
  // A (sender, receiver) pair is one in-order stream and a relay cannot finish before its data
  // has landed, so the relays a landing GPU sends a replica go in the order their data lands: a
  // relayed box has landed once the upstream's own pair has carried the upstream segment holding
  // it (segment_landings), and a relay once its last box has. Landing GPUs here receive from several training
  // GPUs at once, so creation order would not give it; and relays are cut into slices, so the relays of two
  // upstream messages that land together interleave on a pair instead of one waiting for all of the other.
  // Relays of different forwarding depths are planned apart (a deeper one waits for a whole forwarding hop
  // more), so the order holds per pair and depth.
  const auto landed = segment_landings(*plan_);
  std::map<std::tuple<std::int32_t, std::uint32_t, Shape>, std::size_t> exact;  // (transfer, tensor, offset)
  for (const auto& t : plan_->transfers)
    for (std::size_t k = 0; k < t.segments.size(); ++k)
      exact.emplace(std::tuple(t.id, t.segments[k].tensor, t.segments[k].box.offset), k);
  const auto holding = [&](const Segment& s) {
    const auto& up = plan_->transfers[static_cast<std::size_t>(s.via)].segments;
    if (const auto it = exact.find(std::tuple(s.via, s.tensor, s.box.offset));
        it != exact.end() && up[it->second].box.contains(s.box))
      return it->second;
    for (std::size_t k = 0; k < up.size(); ++k)
      if (up[k].tensor == s.tensor && up[k].box.contains(s.box)) return k;
    ADD_FAILURE() << "no segment of transfer " << s.via << " holds a box it relays";
    return std::size_t{0};
  };
  std::vector<std::int32_t> depth(plan_->transfers.size(), 0);
  std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, double> last;           // (pair, depth)
  std::map<std::pair<std::int32_t, std::int32_t>, std::vector<std::int32_t>> upstreams;  // per pair, in order
  for (const auto& t : plan_->transfers) {
    const auto id = static_cast<std::size_t>(t.id);
    double arrival = 0;
    for (const auto& s : t.segments) {
      if (s.via == kFromSourceShard) continue;
      const auto via = static_cast<std::size_t>(s.via);
      arrival = std::max(arrival, landed[via][holding(s)]);
      depth[id] = std::max(depth[id], depth[via] + 1);
      auto& seen = upstreams[{t.sender.value, t.receiver.value}];
      if (seen.empty() || seen.back() != s.via) seen.push_back(s.via);
    }
    auto& previous = last[{t.sender.value, t.receiver.value, depth[id]}];
    EXPECT_GE(arrival, previous) << "transfer " << t.id << " relays data that lands before its predecessor's";
    previous = arrival;
  }
  // Some pair relays data of several upstream messages, and some pair goes back and forth
  // between two of them (A, B, A): their relays interleave.
  const auto interleaved = std::ranges::count_if(upstreams, [](const auto& e) {
    std::set<std::int32_t> done;
    for (std::size_t i = 0; i < e.second.size(); ++i) {
      if (done.contains(e.second[i])) return true;
      if (i > 0) done.insert(e.second[i - 1]);
    }
    return false;
  });
  const auto several = std::ranges::count_if(upstreams, [](const auto& e) { return e.second.size() > 1; });
  EXPECT_GT(several, 0);
  EXPECT_GT(interleaved, 0);
}

}  // namespace
}  // namespace refit
