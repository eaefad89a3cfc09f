// Plan quality on the reference problem, DeepSeek-V3 Megatron PP16xEP16 (256 GPUs) ->
// vLLM TP32xDP8 (256 GPUs) on dgx-h100.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

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

TEST_F(DeepSeekPlan, RelaysGoInTheOrderTheirDataLands) {
  // A (sender, receiver) pair is one in-order stream and a relay cannot finish before its data
  // has landed, so the relays a landing GPU sends a replica go in the order their upstream
  // messages land: by how many bytes the upstream's own pair carries up to its end. Landing GPUs
  // here receive from several training GPUs at once, so creation order would not give it.
  // Relays of different forwarding depths are planned apart (a deeper one waits for a whole
  // forwarding hop more), so the order holds per pair and depth.
  using Pair = std::pair<std::int32_t, std::int32_t>;
  std::map<Pair, std::int64_t> carried;
  std::vector<std::int64_t> landed(plan_->transfers.size());
  std::vector<std::int32_t> depth(plan_->transfers.size(), 0);
  std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t>, std::int64_t> last;  // (pair, depth)
  std::map<Pair, std::set<std::int32_t>> upstream_senders;
  for (const auto& t : plan_->transfers) {
    const auto id = static_cast<std::size_t>(t.id);
    landed[id] = carried[{t.sender.value, t.receiver.value}] += t.bytes.value;
    std::int64_t arrival = 0;
    for (const auto& s : t.segments) {
      if (s.via == kFromSourceShard) continue;
      const auto via = static_cast<std::size_t>(s.via);
      arrival = std::max(arrival, landed[via]);
      depth[id] = std::max(depth[id], depth[via] + 1);
      upstream_senders[{t.sender.value, t.receiver.value}].insert(plan_->transfers[via].sender.value);
    }
    auto& previous = last[{t.sender.value, t.receiver.value, depth[id]}];
    EXPECT_GE(arrival, previous) << "transfer " << t.id << " relays data that lands before its predecessor's";
    previous = arrival;
  }
  const auto several =
      std::ranges::count_if(upstream_senders, [](const auto& e) { return e.second.size() > 1; });
  EXPECT_GT(several, 0);
}

}  // namespace
}  // namespace refit
