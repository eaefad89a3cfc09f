// The what-if use case (refit/facade/sweep.h): the grid of points, what each point stands for,
// and predicting points side by side gives what predicting each alone gives; and compare()'s
// strategies side by side (PredictOptions::jobs) give the rows of one at a time.
#include <sstream>

#include <gtest/gtest.h>

#include "refit/facade/sweep.h"

namespace refit {
namespace {

const ProblemSource kProblem{.model = std::string(REFIT_TEST_DATA_DIR) + "/models/tiny-qwen3-moe.json",
                             .train = "tp=2,ep=2,etp=1",
                             .infer = "tp=2,engines=2"};

std::vector<std::string> values_of(const SweepPoint& p) {
  std::vector<std::string> out;
  for (const auto& [key, value] : p.values) out.push_back(key + "=" + value);
  return out;
}

TEST(Sweep, EveryCombinationTheLastKeyFastestEachAppliedToItsSource) {
  const auto points = sweep_points(kProblem, {.preset = "dgx-h100:nic_gbps=100"},
                                   {{.key = "nic_gbps", .values = {"200", "400"}},
                                    {.key = "infer", .values = {"tp=2,engines=2", "tp=4"}}})
                          .value();
  // 2 x 2 points, in the order of a nested loop over the axes.
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(values_of(points[0]), (std::vector<std::string>{"nic_gbps=200", "infer=tp=2,engines=2"}));
  EXPECT_EQ(values_of(points[1]), (std::vector<std::string>{"nic_gbps=200", "infer=tp=4"}));
  EXPECT_EQ(values_of(points[3]), (std::vector<std::string>{"nic_gbps=400", "infer=tp=4"}));
  // A hardware key replaces what the preset spec said of it; a layout key replaces the layout.
  EXPECT_EQ(points[3].cluster.preset, "dgx-h100:nic_gbps=400");
  EXPECT_EQ(points[3].problem.infer, "tp=4");
  EXPECT_EQ(points[3].problem.train, kProblem.train);
}

TEST(Sweep, NicsPerDomainSplitsOverTheDomainsNodes) {
  // gb200-nvl72: 18 nodes of 4 GPUs per NVLink domain, so 36 NICs per domain are 2 per node;
  // dgx-h100: one node per domain.
  const auto gb200 =
      sweep_points(kProblem, {.preset = "gb200-nvl72"}, {{.key = "nics_per_domain", .values = {"36"}}});
  EXPECT_EQ(gb200.value().front().cluster.preset, "gb200-nvl72:nics_per_node=2");
  // With keys after it (their points are made after its value was read).
  const auto dgx = sweep_points(kProblem, {},
                                {{.key = "nics_per_domain", .values = {"4", "8"}},
                                 {.key = "oversubscription", .values = {"1", "2"}},
                                 {.key = "nic_gbps", .values = {"200"}}});
  EXPECT_EQ(dgx.value()[3].cluster.preset, "dgx-h100:oversubscription=2,nic_gbps=200,nics_per_node=8");
  const auto uneven =
      sweep_points(kProblem, {.preset = "gb200-nvl72"}, {{.key = "nics_per_domain", .values = {"3"}}});
  ASSERT_FALSE(uneven);
  EXPECT_NE(uneven.error().message.find("nics_per_domain=3 does not split over the domain's 18 nodes"),
            std::string::npos)
      << uneven.error().message;
}

TEST(Sweep, RefusesWhatItCannotVaryNamingTheKey) {
  const ProblemSource manifest{.manifest = "tensors.json"};
  const struct {
    ProblemSource problem;
    ClusterSource cluster;
    std::vector<SweepAxis> axes;
    std::string names;
  } cases[] = {
      {kProblem, {}, {{.key = "nic_speed", .values = {"1"}}}, "--vary nic_speed: unknown key"},
      {kProblem, {}, {{.key = "nic_gbps", .values = {}}}, "--vary nic_gbps: needs at least one value"},
      {kProblem,
       {},
       {{.key = "nic_gbps", .values = {"1"}}, {.key = "nic_gbps", .values = {"2"}}},
       "--vary nic_gbps: given twice"},
      {manifest, {}, {{.key = "infer", .values = {"tp=2"}}}, "--vary infer: varies a layout"},
      {kProblem,
       {.file = "cluster.json"},
       {{.key = "nic_gbps", .values = {"1"}}},
       "--vary nic_gbps: varies the hardware"},
  };
  for (const auto& c : cases) {
    const auto made = sweep_points(c.problem, c.cluster, c.axes);
    ASSERT_FALSE(made) << c.names;
    EXPECT_TRUE(made.error().is_bad_input()) << c.names;
    EXPECT_EQ(made.error().message.rfind(c.names, 0), 0u) << made.error().message;
  }
}

TEST(Sweep, PointsSideBySidePredictWhatEachPredictsAloneInTheGridsOrder) {
  const auto points =
      sweep_points(kProblem, {}, {{.key = "nic_gbps", .values = {"100", "200", "400"}}}).value();
  std::vector<std::pair<std::size_t, std::size_t>> reported;
  const SweepOptions options{.predict = {}, .jobs = 2, .progress = [&](std::size_t done, std::size_t total) {
                               reported.emplace_back(done, total);
                             }};
  const auto together = sweep(points, options).value();
  ASSERT_EQ(together.size(), points.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    const auto alone = predict_point(points[i], {}).value();
    const auto& both = together[i].value();
    ASSERT_EQ(both.rows.size(), alone.rows.size());
    for (std::size_t r = 0; r < alone.rows.size(); ++r) {
      EXPECT_EQ(both.rows[r].strategy, alone.rows[r].strategy);
      // The simulator is deterministic: the same point gives the same time bit for bit.
      EXPECT_EQ(both.rows[r].sim.predicted.value, alone.rows[r].sim.predicted.value);
    }
  }
  // Twice the NIC line rate never slows refit down.
  EXPECT_GE(together[0].value().rows.front().sim.predicted.value,
            together[2].value().rows.front().sim.predicted.value);
  // One report per point, counting up to the total.
  EXPECT_EQ(reported, (std::vector<std::pair<std::size_t, std::size_t>>{{1, 3}, {2, 3}, {3, 3}}));
}

TEST(Sweep, APointThatCannotLoadIsItsOwnErrorNamingThePoint) {
  const auto points =
      sweep_points(kProblem, {}, {{.key = "infer", .values = {"tp=2,engines=2", "tp=3"}}}).value();
  const auto results = sweep(points, {.predict = {}, .jobs = 1, .progress = nullptr}).value();
  EXPECT_TRUE(results[0].has_value());
  ASSERT_FALSE(results[1]);
  EXPECT_EQ(results[1].error().message.rfind("at infer=tp=3: ", 0), 0u) << results[1].error().message;
}

TEST(Compare, StrategiesSideBySideGiveTheRowsOfOneAtATimeInTheSameOrder) {
  const auto problem = load_problem(kProblem).value();
  const auto cluster = load_cluster({}, job_of(problem)).value().placed;
  const PredictionInputs in{.source = kProblem, .problem = problem, .cluster = cluster};
  const auto one = compare(in, {.jobs = 1}).value();
  const auto two = compare(in, {.jobs = 2}).value();
  ASSERT_EQ(one.rows.size(), two.rows.size());
  for (std::size_t r = 0; r < one.rows.size(); ++r) {
    EXPECT_EQ(one.rows[r].strategy, two.rows[r].strategy);
    EXPECT_EQ(one.rows[r].deployment, two.rows[r].deployment);
    EXPECT_EQ(one.rows[r].sim.predicted.value, two.rows[r].sim.predicted.value);
    EXPECT_EQ(one.rows[r].time_vs_refit, two.rows[r].time_vs_refit);
  }
  EXPECT_FALSE(compare(in, {.jobs = -1}));
}

TEST(Sweep, RefusesATraceAndNegativeJobs) {
  std::ostringstream trace;
  EXPECT_FALSE(sweep({}, {.predict = {.trace = &trace}, .jobs = 0, .progress = nullptr}));
  EXPECT_FALSE(sweep({}, {.predict = {}, .jobs = -1, .progress = nullptr}));
}

}  // namespace
}  // namespace refit
