// Caps on sizes (limits in checked.h): meshes, shapes and problems that no job has are refused
// before anything is allocated or any product overflows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_code.h"
#include "refit/core/checked.h"
#include "refit/core/layout.h"
#include "refit/core/problem.h"
#include "refit/core/tensor_spec.h"

namespace refit {
namespace {

using testing::error_code;
using ::testing::HasSubstr;

TEST(SizeCaps, MeshPositionsAreCappedBeforeRanksAreMade) {
  // 2^20 positions are allowed; one more axis of 2 is not. Without the cap, 2^62 positions
  // would be materialised (or the product would wrap).
  EXPECT_TRUE(Mesh::make({1024, 1024}));
  const auto r = Mesh::make({1024, 1024, 2});
  EXPECT_EQ(error_code(r), ErrorCode::kOutOfRange);
  EXPECT_THAT(r.error().message, HasSubstr("mesh positions"));
  EXPECT_EQ(error_code(Mesh::make({INT64_MAX, INT64_MAX})), ErrorCode::kOutOfRange);
}

TEST(SizeCaps, RankValuesAreCapped) {
  EXPECT_EQ(error_code(Mesh::make({1}, {Rank{INT32_MAX}})), ErrorCode::kOutOfRange);
}

TEST(SizeCaps, LayoutShapesAreCappedInElements) {
  // `refit layout --shape 9223372036854775807 --mesh 2` printed "elements -9223372036854775808".
  const auto mesh = Mesh::make({2}).value();
  const auto r = Layout::make({INT64_MAX}, mesh, {Placement::shard(0)});
  EXPECT_EQ(error_code(r), ErrorCode::kOutOfRange);
  EXPECT_THAT(r.error().message, HasSubstr("shape: elements"));
  EXPECT_EQ(error_code(Layout::make({1 << 30, 1 << 30}, mesh, {Placement::shard(0)})),
            ErrorCode::kOutOfRange);
}

TEST(SizeCaps, ALayoutsSizesAreCappedEvenBesideAZero) {
  // [0, 2^63 - 1] has 0 elements (within the cap), but a chunked split of its second dim computed
  // 2^63 - 1 - start and overflowed (found by fuzz_layout). Either order is refused.
  const auto mesh = Mesh::make({2}).value();
  for (const Shape& shape : {Shape{0, INT64_MAX}, Shape{INT64_MAX, 0}}) {
    const auto r = Layout::make(shape, mesh, {Placement::shard(1, 8, -2)});
    EXPECT_EQ(error_code(r), ErrorCode::kOutOfRange);
  }
  EXPECT_THAT(Layout::make({0, INT64_MAX}, mesh, {Placement::replicate()}).error().message,
              HasSubstr("shape[1] is 9223372036854775807, above the 281474976710656 elements"));
  EXPECT_TRUE(Layout::make({0, limits::kMaxElements}, mesh, {Placement::shard(1)}));
}

TEST(SizeCaps, ChunksOfTheLargestShapeHaveNoNegativeOffsets) {
  // ceil(2^48 / 3) = 93824992236886; the last of 3 parts is the remainder.
  const std::int64_t l = limits::kMaxElements;
  const auto last = chunk_interval(l, 3, 2);
  EXPECT_EQ(last.offset, 2 * ceil_div(l, 3));
  EXPECT_EQ(last.offset + last.extent, l);
  // Near INT64_MAX too (the algebra itself does not overflow, whatever the caps).
  const auto top = chunk_interval(INT64_MAX, 2, 1);
  EXPECT_GT(top.offset, 0);
  EXPECT_EQ(top.offset + top.extent, INT64_MAX);
}

TEST(SizeCaps, TensorElementsAreCapped) {
  EXPECT_TRUE(make_tensor_spec("w", {1 << 24, 1 << 24}, DType::kBF16));
  const auto r = make_tensor_spec("w", {1 << 24, 1 << 24, 2}, DType::kBF16);
  EXPECT_EQ(error_code(r), ErrorCode::kOutOfRange);
  EXPECT_THAT(r.error().message, HasSubstr("tensor 'w': elements"));
}

TEST(SizeCaps, ProblemBytesAreCapped) {
  // Each tensor of 2^48 fp32 elements is 2^50 bytes; 64 of them make 2^56 (the cap), 65 exceed it.
  const auto mesh = Mesh::make({1}).value();
  const auto dst = Mesh::make({1}, {Rank{1}}).value();
  std::vector<TensorReshard> tensors;
  for (int i = 0; i < 65; ++i) {
    const Shape shape{limits::kMaxElements};
    tensors.push_back({.tensor = make_tensor_spec("t" + std::to_string(i), shape, DType::kFP32).value(),
                       .source = Layout::make(shape, mesh, {Placement::replicate()}).value(),
                       .destination = Layout::make(shape, dst, {Placement::replicate()}).value()});
  }
  const auto r = ReshardProblem::make(tensors, 1, 1);
  EXPECT_EQ(error_code(r), ErrorCode::kOutOfRange);
  EXPECT_THAT(r.error().message, HasSubstr("tensor 't64': the problem's total bytes"));
  tensors.pop_back();
  EXPECT_TRUE(ReshardProblem::make(tensors, 1, 1));
}

}  // namespace
}  // namespace refit
