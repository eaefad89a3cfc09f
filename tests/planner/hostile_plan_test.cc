// Hostile plan files and chunk sizes (issue 18): refused by validate_structure and make_plan
// naming the field, before sizes overflow or millions of chunks are cut.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_code.h"
#include "refit/core/try.h"
#include "refit/planner/plan_json.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

using testing::error_code;
using ::testing::HasSubstr;
using testing::make_layout;
using testing::rank_range;

// One tensor of `shape`, one transfer of `bytes` in chunks of `chunk`, moving `extent` from the
// origin (`offset`).
std::string plan_text(const std::string& shape, const std::string& extent, const std::string& bytes,
                      const std::string& chunk, const std::string& ranks = "1",
                      const std::string& offset = "[0]") {
  return R"({"format":"refit-plan","version":1,"strategy":"refit","source_ranks":)" + ranks +
         R"(,"destination_ranks":1,"tensors":[{"name":"w","shape":)" + shape +
         R"(,"dtype":"bf16"}],"transfers":[{"id":0,"from":0,"to":1,"link":"network","bytes":)" + bytes +
         R"(,"chunk":)" + chunk + R"(,"segments":[{"tensor":0,"offset":)" + offset + R"(,"extent":)" +
         extent + R"(,"via":-1}]}]})";
}

Result<void> read_and_check(const std::string& text) {
  const auto plan = REFIT_TRY(parse_plan_json(text));
  return validate_structure(plan);
}

TEST(HostilePlan, TheTemplateIsAPlan) { EXPECT_TRUE(read_and_check(plan_text("[4]", "[4]", "8", "64"))); }

TEST(HostilePlan, TensorShapesAreCappedBeforeBytesAreCounted) {
  // 2^62 bf16 elements are 2^63 bytes: once a negative size.
  const auto r = read_and_check(plan_text("[4611686018427387904]", "[4611686018427387904]", "8", "64"));
  EXPECT_EQ(error_code(r), ErrorCode::kOutOfRange);
  EXPECT_THAT(r.error().message, HasSubstr("tensor 'w': elements"));
}

TEST(HostilePlan, RankCountsAreCapped) {
  // source + destination ranks once overflowed int32 in world_size().
  const auto r = read_and_check(plan_text("[4]", "[4]", "8", "64", "2147483647"));
  EXPECT_EQ(error_code(r), ErrorCode::kOutOfRange);
}

TEST(HostilePlan, ChunkCountsAreCapped) {
  // 2^20 x 2^20 elements of bf16 = 2^41 bytes in chunks of 1 byte: 2^41 chunks, over 2^34.
  const auto r = read_and_check(
      plan_text("[1048576, 1048576]", "[1048576, 1048576]", "2199023255552", "1", "1", "[0, 0]"));
  EXPECT_EQ(error_code(r), ErrorCode::kOutOfRange);
  EXPECT_THAT(r.error().message, HasSubstr("chunk: 1 bytes cut the plan into more than 17179869184 chunks"));
}

TEST(HostilePlan, MakePlanRefusesAChunkThatCutsTooFine) {
  // 2^34 bf16 elements = 2^35 bytes moved at least once: 2^35 one-byte chunks > 2^34.
  const Shape shape{std::int64_t{1} << 34};
  const auto p =
      ReshardProblem::make({testing::make_reshard("a", shape, make_layout(shape, {1}, rank_range(0, 1), "R"),
                                                  make_layout(shape, {1}, rank_range(1, 1), "R"))},
                           1, 1)
          .value();
  const auto c = testing::make_test_cluster(2, 1, 1, 1);
  const auto plan = make_plan("refit", p, c, PlanOptions{.chunk = Bytes{1}});
  EXPECT_EQ(error_code(plan), ErrorCode::kOutOfRange);
  EXPECT_THAT(plan.error().message, HasSubstr("choose a larger chunk"));
  EXPECT_TRUE(make_plan("refit", p, c, PlanOptions{.chunk = Bytes{1 << 20}}));
}

// 2^32 bf16 elements are 2^33 bytes on each destination rank that holds them whole. A plan the
// collectives run (gather-broadcast) may describe 2^34 chunks: with 1-byte chunks 2 ranks take
// 2^34 (allowed) and 3 take 3 x 2^33 > 2^34. One refit's executors run (direct) is lowered chunk
// by chunk, up to 2^28: 64-byte chunks give 2 x 2^27 = 2^28 (allowed), 32-byte ones 2^29. Both
// refused before planning, naming the tensor where the count passed the limit.
TEST(HostilePlan, MakePlanCountsEveryDestinationCopyBeforePlanning) {
  const Shape shape{std::int64_t{1} << 32};
  const auto replicated_to = [&](std::int32_t copies) {
    return ReshardProblem::make(
               {testing::make_reshard("a", shape, make_layout(shape, {1}, rank_range(0, 1), "R"),
                                      make_layout(shape, {copies}, rank_range(1, copies), "R"))},
               1, copies)
        .value();
  };
  const auto cluster = [](std::int32_t copies) {
    return testing::make_test_cluster(1 + copies, 1, 1, copies);
  };
  const auto chunk = [](std::int64_t bytes) { return PlanOptions{.chunk = Bytes{bytes}}; };
  EXPECT_TRUE(make_plan("gather-broadcast", replicated_to(2), cluster(2), chunk(1)));
  const auto refused = make_plan("gather-broadcast", replicated_to(3), cluster(3), chunk(1));
  EXPECT_EQ(error_code(refused), ErrorCode::kOutOfRange);
  EXPECT_THAT(refused.error().message,
              HasSubstr("counted up to tensor 'a', whose shard on 3 destination ranks takes 8589934592"));
  EXPECT_TRUE(make_plan("direct", replicated_to(2), cluster(2), chunk(64)));
  const auto lowered = make_plan("direct", replicated_to(2), cluster(2), chunk(32));
  EXPECT_EQ(error_code(lowered), ErrorCode::kOutOfRange);
  EXPECT_THAT(lowered.error().message, HasSubstr("more than 268435456 chunks"));
}

}  // namespace
}  // namespace refit
