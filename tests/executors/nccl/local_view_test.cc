// make_local_view refuses buffers and rank maps that do not fit the plan, naming the rank, side
// and index at fault, before anything is allocated or sent.
#include <gtest/gtest.h>

#include "error_code.h"
#include "local_view.h"

namespace refit::nccl_detail {
namespace {

// One [4, 6] fp32 tensor, rank 0 -> rank 1.
Plan plan_of_two() {
  Plan p;
  p.tensors = {TensorSpec{.name = "w", .shape = {4, 6}, .dtype = DType::kFP32}};
  p.source_ranks = 1;
  p.destination_ranks = 1;
  return p;
}

class LocalViewTest : public ::testing::Test {
 protected:
  std::vector<std::byte> memory = std::vector<std::byte>(96);
  Plan plan = plan_of_two();
  LocalRankBuffers rank0{
      .rank = Rank{0},
      .buffers =
          RankBuffers{.memory = MemoryKind::kHost,
                      .sources = {ShardBuffer{.tensor = 0, .box = Box{{0, 0}, {4, 6}}, .bytes = memory}},
                      .destinations = {}}};

  // The message of the refusal, which must be of kind `code`.
  std::string error_of(std::vector<LocalRankBuffers> given, CommRankMap map, CommPosition at,
                       ErrorCode code) {
    auto v = make_local_view(plan, given, map, at, MemoryKind::kHost);
    if (!v) EXPECT_EQ(v.error().code, code) << v.error().message;
    return v ? std::string("no error") : v.error().message;
  }
};

TEST_F(LocalViewTest, AcceptsMatchingBuffersAndNumbersTheShards) {
  auto v = make_local_view(plan, std::vector{rank0}, {}, CommPosition{0, 2}, MemoryKind::kHost);
  ASSERT_TRUE(v) << v.error().message;
  ASSERT_EQ(v->ranks.size(), 1u);
  EXPECT_EQ(v->ranks[0].first_source, 0);
  EXPECT_EQ(v->ranks[0].shards.sources[0].box, (Box{{0, 0}, {4, 6}}));
  EXPECT_EQ(v->shards[0].data(), memory.data());
  EXPECT_EQ(v->comm_rank_of, (std::vector<std::int32_t>{0, 1}));
}

TEST_F(LocalViewTest, RefusesWhatDoesNotFit) {
  EXPECT_EQ(error_of({rank0}, {}, CommPosition{0, 3}, ErrorCode::kMismatch),
            "the plan has 2 ranks and the communicator 3: give a map from plan ranks to communicator ranks");
  EXPECT_EQ(error_of({rank0}, {0, 0}, CommPosition{0, 1}, ErrorCode::kMismatch),
            "plan rank 1 runs on this communicator rank (0) but no buffers were given for it");
  EXPECT_EQ(error_of({rank0}, {1, 0}, CommPosition{0, 2}, ErrorCode::kMismatch),
            "plan rank 0 runs on communicator rank 1, not on this one (0)");
  EXPECT_EQ(error_of({rank0}, {0, 5}, CommPosition{0, 2}, ErrorCode::kOutOfRange),
            "comm_rank_of[1] is 5, outside the communicator's 2 ranks");
  auto wrong = rank0;
  wrong.buffers.sources[0].bytes = std::span(memory).first(95);
  EXPECT_EQ(error_of({wrong}, {}, CommPosition{0, 2}, ErrorCode::kMismatch),
            "rank 0: sources[0]: the buffer of tensor 'w' holds 95 bytes, its box [0:4, 0:6] needs 96");
  wrong = rank0;
  wrong.buffers.sources[0].box = Box{{0, 0}, {5, 6}};
  EXPECT_EQ(error_of({wrong}, {}, CommPosition{0, 2}, ErrorCode::kMismatch),
            "rank 0: sources[0]: box [0:5, 0:6] is not inside tensor 'w'");
  wrong = rank0;
  wrong.buffers.memory = MemoryKind::kCuda;
  EXPECT_EQ(error_of({wrong}, {}, CommPosition{0, 2}, ErrorCode::kUnsupported),
            "rank 0: the buffers are CUDA memory, this executor moves host memory");
  EXPECT_EQ(error_of({rank0, rank0}, {0, 0}, CommPosition{0, 1}, ErrorCode::kInvalidArgument),
            "rank 0 is given twice");
}

}  // namespace
}  // namespace refit::nccl_detail
