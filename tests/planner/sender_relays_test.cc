// Sending through a neighbour's NIC (sender_relays.h) on hand-built assignments.
#include <deque>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model_problems.h"
#include "refit/planner/plan.h"
#include "refit_pieces.h"
#include "sender_relays.h"
#include "test_cluster.h"

namespace refit::planner_detail {
namespace {

// Rank 0 sends box b (the first b_rows rows of a bf16 tensor 1024 wide, 2 KiB a row) and box c
// (the c_rows after them) to ranks 2 and 4 (nodes 1 and 2); rank 1 beside it sends nothing. The
// assignments once relay_at_senders has levelled node 0's NICs, cutting no finer than min_split;
// `boxes` keeps b and c (b first).
std::vector<Assignment> relayed(std::deque<Box>& boxes, std::int64_t b_rows, std::int64_t c_rows,
                                double min_split) {
  const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
  const Box& b = boxes.emplace_back(Box{{0, 0}, {b_rows, 1024}});
  const Box& c = boxes.emplace_back(Box{{b_rows, 0}, {c_rows, 1024}});
  auto assignment = [](std::uint32_t piece, std::int32_t landing, const Box& box) {
    return Assignment{.item = {.tensor = 0, .dest = 0, .group = 0, .piece = piece},
                      .sender = Rank{0},
                      .landing = Rank{landing},
                      .box = &box};
  };
  std::vector<Assignment> a{assignment(0, 2, b), assignment(0, 4, b), assignment(1, 2, c),
                            assignment(1, 4, c)};
  std::vector<std::int64_t> bytes{b_rows * 2048, b_rows * 2048, c_rows * 2048, c_rows * 2048};
  const RelayCuts cuts{.element_size = {2}, .min_split = min_split, .touches = [](auto...) { return false; }};
  relay_at_senders(
      a, bytes, boxes, [] { return std::vector<std::int32_t>(6, 0); }, cluster, cuts);
  return a;
}

TEST(SenderRelays, ABoxSentToTwoDomainsHopsToItsRelayOnce) {
  // b of 1 MiB and c of 2 MiB: NIC 0 sends 6 MiB and each receiving NIC takes in 3: the level is
  // 3 MiB (the mean of node 0's NICs, and the busiest receiver's), so 3 MiB should move to rank
  // 1's NIC: b to rank 2 and b to rank 4, whole, and c not at all (what is left, 1 MiB, is less
  // than the 4 MiB these cuts allow). Both copies of b cross from rank 1 after one NVLink hop that
  // brings b there once (two hops would land it twice in the relay's scratch): NIC 0 sends c
  // twice, 4 MiB, and NIC 1 b twice, 2 MiB.
  std::deque<Box> boxes;
  const auto a = relayed(boxes, 512, 1024, 4 << 20);
  ASSERT_EQ(a.size(), 5u);  // one hop added
  const auto& hop = a[4];
  EXPECT_TRUE(hop.hop);
  EXPECT_EQ(hop.sender, Rank{0});
  EXPECT_EQ(hop.landing, Rank{1});
  EXPECT_EQ(*hop.box, boxes[0]);
  EXPECT_EQ(a[0].relay_from, 4);
  EXPECT_EQ(a[1].relay_from, 4);
  EXPECT_EQ(a[2].relay_from, -1);
  EXPECT_EQ(a[3].relay_from, -1);
}

TEST(SenderRelays, HeadRowsOfABoxAlreadyHoppedToTheRelayComeFromThatHop) {
  // b of 2 MiB and c of 1 MiB: NIC 0 sends 6 MiB, each receiving NIC takes in 3, so 3 MiB move
  // to rank 1's NIC: b to rank 2 whole (2 MiB), then the head rows of b to rank 4 (1 MiB, all the
  // room left). The relay sends those rows on from the hop that brought it all of b: a second hop
  // with them would travel in the same (0, 1) message as the first and land them twice (three
  // model problems of a random sweep were refused as invalid plans).
  std::deque<Box> boxes;
  const auto a = relayed(boxes, 1024, 512, 256 << 10);
  const Box& b = boxes[0];
  ASSERT_EQ(a.size(), 6u);  // b's head rows to rank 4, and one hop
  EXPECT_TRUE(a[4].hop);
  EXPECT_EQ(*a[4].box, b);
  EXPECT_EQ(a[0].relay_from, 4);
  EXPECT_EQ(a[5].landing, Rank{4});
  EXPECT_TRUE(b.contains(*a[5].box) && *a[5].box != b);
  EXPECT_EQ(a[5].relay_from, 4);
  EXPECT_EQ(a[1].relay_from, -1);  // b's other rows, still from rank 0
}

TEST(SenderRelays, ModelProblemsWhoseRelaysTakeABoxAndHeadRowsOfItPlanValid) {
  // The random sweep's three: each had a sender's hop message to one relay carry a box and rows
  // of it, refused as "written twice".
  struct Case {
    std::string model, train, infer, cluster;
  };
  const std::string data = REFIT_TEST_DATA_DIR;
  for (const auto& [model, train, infer, cluster] :
       {Case{data + "/models/small-llama-gqa-blocks.json", "tp=1", "tp=4,engines=4", "dgx-h100:latency_us=0"},
        Case{data + "/models/wide-llama.json", "tp=1", "tp=2,engines=5", "dgx-h100:gpus_per_node=4"}}) {
    SCOPED_TRACE(model + " " + infer + " " + cluster);
    const auto mp = testing::file_problem(model, train, infer, cluster);
    const auto plan = make_plan("refit", mp.problem, mp.cluster);
    ASSERT_TRUE(plan) << plan.error().message;
    const auto valid = validate(*plan, mp.problem);
    EXPECT_TRUE(valid) << valid.error().message;
  }
}

}  // namespace
}  // namespace refit::planner_detail
