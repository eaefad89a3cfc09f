// Chunks of a message: at most the limit, ending on element boundaries of whatever segment they
// cut, and their pieces tile the message in order.
#include <gtest/gtest.h>

#include "refit/lowering/message_layout.h"

namespace refit::lowering {
namespace {

Plan mixed_plan() {
  // Segments of 3 int8 (3 bytes), 5 fp64 (40 bytes) and 7 fp16 (14 bytes): 57 bytes, and every
  // segment after the first starts off its element alignment in the message.
  Plan p;
  p.tensors = {TensorSpec{.name = "a", .shape = {3}, .dtype = DType::kInt8},
               TensorSpec{.name = "b", .shape = {5}, .dtype = DType::kFP64},
               TensorSpec{.name = "c", .shape = {7}, .dtype = DType::kFP16}};
  p.source_ranks = 1;
  p.destination_ranks = 1;
  Transfer t{.id = 0,
             .sender = Rank{0},
             .receiver = Rank{1},
             .link = LinkKind::kNetwork,
             .segments = {},
             .bytes = Bytes{57},
             .chunk = Bytes{16}};
  t.segments = {Segment{.tensor = 0, .box = Box{{0}, {3}}}, Segment{.tensor = 1, .box = Box{{0}, {5}}},
                Segment{.tensor = 2, .box = Box{{0}, {7}}}};
  p.transfers.push_back(t);
  return p;
}

TEST(MessageLayout, ChunksEndOnElementBoundariesAndPiecesTileTheMessage) {
  const auto plan = mixed_plan();
  for (const std::int64_t max : {16, 32, 48, 64, 1 << 20}) {
    const MessageLayout layout(plan, plan.transfers[0], max);
    std::int64_t at = 0;
    for (std::int64_t k = 0; k < layout.chunks(); ++k) {
      EXPECT_EQ(layout.chunk_begin(k), at);
      EXPECT_LE(layout.chunk_bytes(k), max);
      for (const auto& p : layout.pieces(k)) {
        const auto es = layout.element_size(p.segment);
        // The piece starts where the message has got to, and is whole elements of its segment.
        EXPECT_EQ(layout.chunk_begin(k) + p.offset, at);
        EXPECT_EQ(layout.segment_offset(p.segment) + p.first * es, at);
        EXPECT_EQ(layout.chunk_of(at), k);
        at += p.count * es;
      }
      EXPECT_EQ(at, layout.chunk_end(k));
    }
    EXPECT_EQ(at, 57);
  }
}

TEST(MessageLayout, SixteenByteChunksOfTheMixedMessage) {
  // Bytes 0-2 int8, 3-42 fp64 (elements at 3, 11, 19, 27, 35), 43-56 fp16. Cutting at the last
  // element boundary at or before each 16-byte step: 11, 27, 43, 57.
  const auto plan = mixed_plan();
  const MessageLayout layout(plan, plan.transfers[0], 16);
  ASSERT_EQ(layout.chunks(), 4);
  EXPECT_EQ(layout.chunk_end(0), 11);
  EXPECT_EQ(layout.chunk_end(1), 27);
  EXPECT_EQ(layout.chunk_end(2), 43);
  EXPECT_EQ(layout.chunk_end(3), 57);
}

Plan one_fp16_plan(std::int64_t elements) {
  Plan p = mixed_plan();
  p.tensors = {TensorSpec{.name = "h", .shape = {elements}, .dtype = DType::kFP16}};
  p.transfers[0].segments = {Segment{.tensor = 0, .box = Box{{0}, {elements}}}};
  p.transfers[0].bytes = Bytes{2 * elements};
  return p;
}

// chunk_of(byte) is the number of chunk ends at or before `byte` (brute force over every chunk),
// for bytes before, inside and after the message.
void expect_chunk_of_counts_ends(const MessageLayout& layout) {
  for (std::int64_t byte = -3; byte <= layout.bytes() + 3; ++byte) {
    std::int64_t ended = 0;
    for (std::int64_t k = 0; k < layout.chunks(); ++k) ended += layout.chunk_end(k) <= byte ? 1 : 0;
    EXPECT_EQ(layout.chunk_of(byte), ended) << "byte " << byte;
  }
}

TEST(MessageLayout, FullChunksEndEveryLimitBytesAndTheLastAtTheMessagesEnd) {
  // 40 fp16 elements, 80 bytes: every 16-byte step is an element boundary, so chunks of 16 end at
  // 16, 32, ..., 80, and chunks of 32 at 32, 64 and 80 (the last one short).
  const auto plan = one_fp16_plan(40);
  const MessageLayout sixteen(plan, plan.transfers[0], 16);
  ASSERT_EQ(sixteen.chunks(), 5);
  for (std::int64_t k = 0; k < 5; ++k) EXPECT_EQ(sixteen.chunk_end(k), 16 * (k + 1));
  expect_chunk_of_counts_ends(sixteen);
  const MessageLayout thirty_two(plan, plan.transfers[0], 32);
  ASSERT_EQ(thirty_two.chunks(), 3);
  EXPECT_EQ(thirty_two.chunk_end(0), 32);
  EXPECT_EQ(thirty_two.chunk_end(1), 64);
  EXPECT_EQ(thirty_two.chunk_end(2), 80);
  EXPECT_EQ(thirty_two.chunk_bytes(2), 16);
  expect_chunk_of_counts_ends(thirty_two);
  const auto empty = one_fp16_plan(0);
  const MessageLayout none(empty, empty.transfers[0], 16);
  EXPECT_EQ(none.chunks(), 0);
  expect_chunk_of_counts_ends(none);
}

TEST(MessageLayout, ChunkOfCountsTheEndsOfCutsOnElementBoundaries) {
  const auto plan = mixed_plan();
  for (const std::int64_t max : {16, 32, 48, 64, 1 << 20})
    expect_chunk_of_counts_ends(MessageLayout(plan, plan.transfers[0], max));
}

// The chunk rule: the transfer's chunk, at most half the staging, on 16-byte steps, at least 16.
TEST(ChunkLimit, IsTheTransfersChunkWithinHalfTheStaging) {
  Transfer t;
  t.chunk = Bytes{8 << 20};
  EXPECT_EQ(chunk_limit(t, Bytes{256 << 20}), 8 << 20);  // 8 MiB < 128 MiB
  EXPECT_EQ(chunk_limit(t, Bytes{4 << 20}), 2 << 20);    // half of 4 MiB
  EXPECT_EQ(chunk_limit(t, Bytes{100}), 48);             // 50 rounded down to 16 bytes
  EXPECT_EQ(chunk_limit(t, Bytes{32}), 16);
  t.chunk = Bytes{1000};
  EXPECT_EQ(chunk_limit(t, Bytes{256 << 20}), 992);  // 1000 rounded down to 16 bytes
  t.chunk = Bytes{0};                                // no chunk of its own: half the staging
  EXPECT_EQ(chunk_limit(t, Bytes{1 << 20}), 1 << 19);
}

}  // namespace
}  // namespace refit::lowering
