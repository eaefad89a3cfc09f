// A join over the frameworks' own parameters (Megatron's on the training ranks, vLLM's on the
// engines): with join_storage's maps, whichever side sends each tensor, every element of the
// joining engine's parameters lands where vLLM keeps it and padding stays zero. The peers' source
// buffers are their own inference parameters, which is what an executor binds for a peer.
#include <gtest/gtest.h>

#include "refit/facade/join_storage.h"
#include "refit/facade/problem_source.h"
#include "refit/planner/strategy.h"
#include "stored_run.h"
#include "test_cluster.h"

namespace refit {
namespace {

constexpr ZeroCopyRule kManyPuts{.max_runs = 16, .min_mean_run = Bytes{4096}};

TEST(JoinStorage, AJoinRunsOverTheFrameworksParameters) {
  // 4 training ranks (TP2 x EP2) and 3 engines of TP2 on 2-GPU nodes: each engine a node.
  const ProblemSource source{.model = std::string(REFIT_TEST_DATA_DIR) + "/models/tiny-qwen3-moe.json",
                             .train = "tp=2,ep=2,etp=1",
                             .infer = "tp=2,engines=3",
                             .model_options = {},
                             .manifest = {}};
  const auto problem = load_problem(source).value();
  const auto training = load_storage(source, problem, true).value();
  const auto inference = load_storage(source, problem, false).value();
  const auto cluster = testing::make_test_cluster(5, 2, 4, 6);
  for (const auto from : {JoinSource::kPeers, JoinSource::kBoth, JoinSource::kTraining}) {
    SCOPED_TRACE(join_source_name(from));
    const auto joined =
        join_problem(problem, cluster, {.engines = 3, .joining = 1, .peers = {0, 2}, .source = from}).value();
    const auto storage = join_storage(joined, training, inference);
    ASSERT_TRUE(storage) << storage.error().message;
    const auto plan =
        make_plan("refit", joined.problem, joined.cluster, PlanOptions{.chunk = Bytes{4096}}).value();
    const auto ran = lowering::testing::run_stored(plan, joined.problem, storage->sources,
                                                   storage->destinations, kManyPuts);
    ASSERT_TRUE(ran) << ran.error().message;
  }
}

}  // namespace
}  // namespace refit
