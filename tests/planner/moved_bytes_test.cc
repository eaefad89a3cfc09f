// PlanOptions::moved_bytes: the refit strategy balances its senders by the bytes a delta refit moves
// per tensor instead of the dense bytes.
//
// The reference is a brute force over every integral assignment of pieces to their holders: the
// smallest possible most-loaded sender, in moved bytes, when no piece is cut. refit's balance is the
// fractional optimum (a max-flow, nic_balance.h) with pieces cut by rows where it cuts them, which
// is never above the integral optimum; what it adds is rounding: a share walked to within
// min_split (1 MiB of dense data at the problem's mean ratio of moved to dense bytes) on either
// side, and the max-flow's 4 KiB units. So for every instance
//   max sender load (moved bytes) <= integral optimum * (1 + 1e-3) + 2 * min_split + 64 KiB.
// Two cases are sampled, and the bound holds in both because the max-flow is exact in both:
// identical replica sets (every tensor on every training rank: data parallel, where greedy
// largest-first would already be within Graham's 4/3) and restricted holder sets (each tensor on a
// random subset of the training ranks, where greedy has no constant bound).
#include <algorithm>
#include <functional>
#include <random>

#include <gtest/gtest.h>

#include "random_problems.h"
#include "refit/planner/strategy.h"
#include "strategy_names.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

using testing::make_layout;
using testing::make_reshard;
using testing::make_test_cluster;
using testing::rank_range;

// A weighted instance: tensor t is held whole by holders[t] (training ranks) and needed whole by
// the single inference rank, each rank on a node of its own (its own NIC).
struct Instance {
  std::int32_t senders = 0;
  std::vector<std::vector<Rank>> holders;
  std::vector<std::int64_t> rows;  // of 1024 bf16 elements (2 KiB) each
  std::vector<Bytes> moved;
};

constexpr std::int64_t kRowBytes = 2048;

ReshardProblem problem_of(const Instance& in) {
  std::vector<TensorReshard> tensors;
  for (std::size_t t = 0; t < in.holders.size(); ++t) {
    const Shape shape{in.rows[t], 1024};
    const auto n = static_cast<std::int64_t>(in.holders[t].size());
    tensors.push_back(make_reshard("t" + std::to_string(t), shape,
                                   make_layout(shape, {n}, in.holders[t], "R"),
                                   make_layout(shape, {1}, {Rank{in.senders}}, "R")));
  }
  return ReshardProblem::make(std::move(tensors), in.senders, 1).value();
}

// Each sender's moved bytes in `plan` (each network segment weighs its share of its tensor's).
std::vector<double> sender_loads(const Plan& plan, const Instance& in) {
  std::vector<double> load(static_cast<std::size_t>(in.senders), 0.0);
  for (const auto& t : plan.transfers)
    for (const auto& s : t.segments) {
      const double dense = static_cast<double>(in.rows[s.tensor] * kRowBytes);
      load[static_cast<std::size_t>(t.sender.value)] += static_cast<double>(plan.segment_bytes(s).value) /
                                                        dense * static_cast<double>(in.moved[s.tensor].value);
    }
  return load;
}

// The smallest most-loaded sender over every assignment of whole tensors to one of their holders.
double integral_optimum(const Instance& in) {
  std::vector<double> load(static_cast<std::size_t>(in.senders), 0.0);
  double best = std::numeric_limits<double>::infinity();
  std::function<void(std::size_t)> go = [&](std::size_t t) {
    const double now = std::ranges::max(load);
    if (now >= best) return;
    if (t == in.holders.size()) {
      best = now;
      return;
    }
    for (const Rank h : in.holders[t]) {
      load[static_cast<std::size_t>(h.value)] += static_cast<double>(in.moved[t].value);
      go(t + 1);
      load[static_cast<std::size_t>(h.value)] -= static_cast<double>(in.moved[t].value);
    }
  };
  go(0);
  return best;
}

Instance random_instance(std::mt19937_64& rng, bool identical) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  Instance in;
  in.senders = static_cast<std::int32_t>(pick(2, 3));
  const auto tensors = pick(3, 8);
  for (std::int64_t t = 0; t < tensors; ++t) {
    in.rows.push_back(pick(256, 8192));  // 0.5 to 16 MiB
    // A quarter of the tensors frozen (nothing moves), the others moving 1 % to 100 % of their bytes.
    const double ratio = pick(0, 3) == 0 ? 0.0 : static_cast<double>(pick(1, 100)) / 100.0;
    in.moved.push_back(
        Bytes{static_cast<std::int64_t>(ratio * static_cast<double>(in.rows.back() * kRowBytes))});
    std::vector<Rank> h;
    if (identical) {
      h = rank_range(0, in.senders);
    } else {
      for (std::int32_t r = 0; r < in.senders; ++r)
        if (pick(0, 1) == 1) h.emplace_back(r);
      if (h.empty()) h.emplace_back(static_cast<std::int32_t>(pick(0, in.senders - 1)));
    }
    in.holders.push_back(std::move(h));
  }
  return in;
}

double rounding_slack(const Instance& in) {
  double moved = 0, dense = 0;
  for (std::size_t t = 0; t < in.rows.size(); ++t) {
    moved += static_cast<double>(in.moved[t].value);
    dense += static_cast<double>(in.rows[t] * kRowBytes);
  }
  return 2.0 * (1 << 20) * moved / dense + 64.0 * 1024;
}

void check_against_brute_force(bool identical, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 60; ++i) {
    const auto in = random_instance(rng, identical);
    SCOPED_TRACE(::testing::Message() << "instance " << i);
    const auto problem = problem_of(in);
    const auto cluster = make_test_cluster(in.senders + 1, 1, in.senders, 1);
    const auto plan = make_plan("refit", problem, cluster, PlanOptions{.moved_bytes = in.moved});
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_TRUE(validate(*plan, problem));
    const double most = std::ranges::max(sender_loads(*plan, in));
    EXPECT_LE(most, integral_optimum(in) * (1 + 1e-3) + rounding_slack(in));
  }
}

TEST(MovedBytes, IdenticalReplicasBalanceMovedBytesWithinRoundingOfTheBruteForce) {
  check_against_brute_force(true, 7);
}

TEST(MovedBytes, RestrictedHoldersBalanceMovedBytesWithinRoundingOfTheBruteForce) {
  check_against_brute_force(false, 8);
}

TEST(MovedBytes, AFrozenTensorCostsNothing) {
  // Three 8 MiB tensors on both of two training ranks; the first does not change. The other two
  // move all their bytes: one per sender, 8 MiB each (the dense balance gives each 12 MiB of
  // dense data, so one of them carries a changing tensor and a half: 12 MiB moved).
  const Instance in{.senders = 2,
                    .holders = {rank_range(0, 2), rank_range(0, 2), rank_range(0, 2)},
                    .rows = {4096, 4096, 4096},
                    .moved = {Bytes{0}, Bytes{8 << 20}, Bytes{8 << 20}}};
  const auto problem = problem_of(in);
  const auto cluster = make_test_cluster(3, 1, 2, 1);
  const auto weighted = make_plan("refit", problem, cluster, PlanOptions{.moved_bytes = in.moved}).value();
  ASSERT_TRUE(validate(weighted, problem));  // the frozen tensor is still delivered
  for (const double load : sender_loads(weighted, in)) EXPECT_NEAR(load, 8 << 20, 64 * 1024);
  const auto dense = make_plan("refit", problem, cluster).value();
  EXPECT_NEAR(std::ranges::max(sender_loads(dense, in)), 12 << 20, 64 * 1024);
}

TEST(MovedBytes, DenseMovedBytesGiveThePlanWithout) {
  // Moved bytes equal to the dense bytes weigh every piece as without them: the same plan, for
  // every strategy, on random problems.
  testing::RandomProblems gen(11);
  for (int i = 0; i < 200; ++i) {
    const auto src = static_cast<std::int32_t>(gen.uniform(1, 4));
    const auto dst = static_cast<std::int32_t>(gen.uniform(1, 4));
    const auto problem = gen.problem(src, dst, gen.uniform(1, 3), 9, 0);
    const auto cluster = make_test_cluster(src + dst, 1, src, dst);
    PlanOptions options;
    for (const auto& t : problem.tensors()) options.moved_bytes.push_back(t.tensor.bytes());
    for (const auto name : strategy_names()) {
      SCOPED_TRACE(::testing::Message() << "case " << i << " strategy " << name);
      EXPECT_EQ(plan_hash(make_plan(name, problem, cluster, options).value()),
                plan_hash(make_plan(name, problem, cluster).value()));
    }
  }
}

TEST(MovedBytes, ACountOrSizeThatDoesNotFitIsRefusedNamingIt) {
  const Instance in{.senders = 2, .holders = {rank_range(0, 2)}, .rows = {256}, .moved = {Bytes{1}}};
  const auto problem = problem_of(in);
  const auto cluster = make_test_cluster(3, 1, 2, 1);
  const auto two = make_plan("refit", problem, cluster, PlanOptions{.moved_bytes = {Bytes{1}, Bytes{2}}});
  ASSERT_FALSE(two);
  EXPECT_EQ(two.error().code, ErrorCode::kMismatch);
  EXPECT_NE(two.error().message.find("2 tensors"), std::string::npos);
  const auto negative = make_plan("refit", problem, cluster, PlanOptions{.moved_bytes = {Bytes{-1}}});
  ASSERT_FALSE(negative);
  EXPECT_EQ(negative.error().code, ErrorCode::kOutOfRange);
  EXPECT_NE(negative.error().message.find("'t0'"), std::string::npos);
}

}  // namespace
}  // namespace refit
