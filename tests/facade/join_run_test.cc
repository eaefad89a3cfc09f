// plan_join and join_buffers, the join that `refit run --join` and the Python package perform:
// each process's part follows the join's rank space (training ranks first when they send, then
// the peers' ranks in ascending order, then the joining engine's), a process the join does not
// need is free, and the buffers a rank prepares the join with are its full-refit buffers
// themselves (same memory), with exactly the tensors and boxes the join problem gives the rank.
#include <gtest/gtest.h>

#include "refit/executors/host_shards.h"
#include "refit/executors/rank_buffers.h"
#include "refit/facade/join_run.h"
#include "refit/lowering/rank_program.h"
#include "test_cluster.h"

namespace refit {
namespace {

// 2 training ranks (TP2 x EP2: EP over TP's ranks, ranks 0, 1) and 3 engines of TP2: engine e is
// ranks 2+2e, 3+2e; four nodes of two GPUs.
ReshardProblem tiny_problem() {
  return load_problem(ProblemSource{.model = std::string(REFIT_TEST_DATA_DIR) + "/models/tiny-qwen3-moe.json",
                                    .train = "tp=2,ep=2,etp=1",
                                    .infer = "tp=2,engines=3",
                                    .model_options = {},
                                    .manifest = {}})
      .value();
}

JoinRun join_of(const ReshardProblem& problem, JoinRequest request) {
  const auto cluster = testing::make_test_cluster(4, 2, 2, 6);
  auto run = plan_join(problem, cluster, 3, request, "refit", PlanOptions{.chunk = Bytes{4096}});
  EXPECT_TRUE(run) << run.error().message;
  return std::move(*run);
}

std::vector<std::pair<std::string_view, std::int32_t>> parts(const JoinRun& run) {
  std::vector<std::pair<std::string_view, std::int32_t>> out;
  for (std::int32_t g = 0; g < 8; ++g) {
    const auto p = run.part(Rank{g});
    out.emplace_back(join_role_name(p.role), p.rank ? p.rank->value : -1);
  }
  return out;
}

TEST(JoinRun, EachProcessHasItsPartInTheJoinsRankSpace) {
  const auto problem = tiny_problem();
  using Parts = std::vector<std::pair<std::string_view, std::int32_t>>;
  // Engine 1 (ranks 4, 5) from peers 0 and 2 (every other engine, the default): the training
  // ranks are free; join ranks 0-3 are global 2, 3, 6, 7 and the joining engine's are 4, 5.
  const auto peers = join_of(problem, {.joining = 1, .peers = {}, .from = JoinSource::kPeers});
  EXPECT_EQ(peers.options.peers, (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(parts(peers), (Parts{{"free", -1},
                                 {"free", -1},
                                 {"peer", 0},
                                 {"peer", 1},
                                 {"joining", 4},
                                 {"joining", 5},
                                 {"peer", 2},
                                 {"peer", 3}}));
  EXPECT_EQ(peers.world(), (std::vector<Rank>{Rank{2}, Rank{3}, Rank{6}, Rank{7}, Rank{4}, Rank{5}}));
  // Engine 0 from the training ranks and engine 2: engine 1 is free.
  const auto both = join_of(problem, {.joining = 0, .peers = {2}, .from = JoinSource::kBoth});
  EXPECT_EQ(parts(both), (Parts{{"training", 0},
                                {"training", 1},
                                {"joining", 4},
                                {"joining", 5},
                                {"free", -1},
                                {"free", -1},
                                {"peer", 2},
                                {"peer", 3}}));
  // From the training ranks alone every other engine is free.
  const auto training = join_of(problem, {.joining = 2, .peers = {}, .from = JoinSource::kTraining});
  EXPECT_EQ(parts(training), (Parts{{"training", 0},
                                    {"training", 1},
                                    {"free", -1},
                                    {"free", -1},
                                    {"free", -1},
                                    {"free", -1},
                                    {"joining", 2},
                                    {"joining", 3}}));
}

// Every rank's full-refit buffers on the heap; the join's buffers are views of them whose
// (tensor, box) list is lowering::shards_of(join problem, join rank), and check_rank_buffers
// takes them against the join's plan.
TEST(JoinRun, TheJoinsBuffersAreTheFullRefitsOwnMemory) {
  const auto problem = tiny_problem();
  for (const auto from : {JoinSource::kPeers, JoinSource::kBoth, JoinSource::kTraining}) {
    SCOPED_TRACE(join_source_name(from));
    const auto run = join_of(problem, {.joining = 1, .peers = {}, .from = from});
    for (std::int32_t g = 0; g < problem.world_size(); ++g) {
      SCOPED_TRACE(g);
      const auto full = HostShards::allocate(problem, Rank{g});
      const auto part = run.part(Rank{g});
      const auto mine = join_buffers(run, Rank{g}, full.buffers());
      if (!part.rank) {
        EXPECT_TRUE(mine.sources.empty() && mine.destinations.empty());
        continue;
      }
      const auto expected = lowering::shards_of(run.join.problem, *part.rank);
      ASSERT_EQ(mine.sources.size(), expected.sources.size());
      ASSERT_EQ(mine.destinations.size(), expected.destinations.size());
      for (std::size_t i = 0; i < mine.sources.size(); ++i)
        EXPECT_EQ(std::pair(mine.sources[i].tensor, mine.sources[i].box),
                  std::pair(expected.sources[i].tensor, expected.sources[i].box));
      for (std::size_t i = 0; i < mine.destinations.size(); ++i)
        EXPECT_EQ(std::pair(mine.destinations[i].tensor, mine.destinations[i].box),
                  std::pair(expected.destinations[i].tensor, expected.destinations[i].box));
      // The same memory: a peer sends from the bytes it holds its engine's weights in.
      const auto& held =
          part.role == JoinRole::kTraining ? full.buffers().sources : full.buffers().destinations;
      for (const auto* side : {&mine.sources, &mine.destinations})
        for (const auto& b : *side) {
          const auto same =
              std::ranges::find_if(held, [&](const ShardBuffer& h) { return h.tensor == b.tensor; });
          ASSERT_NE(same, held.end());
          EXPECT_EQ(b.bytes.data(), same->bytes.data());
        }
      const auto checked = check_rank_buffers(run.plan, *part.rank, mine, MemoryKind::kHost);
      EXPECT_TRUE(checked) << checked.error().message;
    }
  }
}

TEST(JoinRun, BadEnginesNameTheirOption) {
  const auto problem = tiny_problem();
  const auto cluster = testing::make_test_cluster(4, 2, 2, 6);
  for (const auto& [request, text] : std::vector<std::pair<JoinRequest, std::string>>{
           {{.joining = 3, .peers = {}, .from = JoinSource::kBoth}, "--join: engine 3 is not in [0, 3)"},
           {{.joining = 0, .peers = {0}, .from = JoinSource::kPeers},
            "--peers: engine 0 is the one that joins"},
           {{.joining = 0, .peers = {2, 1}, .from = JoinSource::kPeers}, "--peers: 1 follows 2"},
           {{.joining = 0, .peers = {5}, .from = JoinSource::kBoth}, "--peers: engine 5 is not in [0, 3)"},
           {{.joining = 0, .peers = {1}, .from = JoinSource::kTraining}, "--peers: with --from training"}}) {
    const auto run = plan_join(problem, cluster, 3, request, "refit", {});
    ASSERT_FALSE(run) << text;
    EXPECT_NE(run.error().message.find(text), std::string::npos) << run.error().message;
  }
  const auto alone =
      plan_join(problem, cluster, 1, {.joining = 0, .peers = {}, .from = JoinSource::kPeers}, "refit", {});
  ASSERT_FALSE(alone);
  EXPECT_NE(alone.error().message.find("--from peers: engine 0 is the only engine"), std::string::npos)
      << alone.error().message;
}

TEST(JoinRun, TheOnlyEngineIsFilledFromTheTrainingRanksByDefault) {
  // With no other engine, the default --from both was refused naming --peers, which nobody gave:
  // the training ranks alone can fill it, and do.
  const auto problem = tiny_problem();
  const auto cluster = testing::make_test_cluster(4, 2, 2, 6);
  const auto run =
      plan_join(problem, cluster, 1, {.joining = 0, .peers = {}, .from = JoinSource::kBoth}, "refit", {});
  ASSERT_TRUE(run) << run.error().message;
  EXPECT_EQ(run->options.source, JoinSource::kTraining);
  EXPECT_TRUE(run->options.peers.empty());
}

}  // namespace
}  // namespace refit
