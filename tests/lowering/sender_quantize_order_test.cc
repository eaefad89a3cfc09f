// sender_quantize_order: a sender quantizes its boxes in the order its transfers first read
// them, and each transfer waits for the boxes it reads, checked on a plan built by hand.
#include "refit/lowering/sender_quantize_order.h"

#include <gtest/gtest.h>

namespace refit::lowering {
namespace {

// Weights a, b, c quantized at the senders, each followed by its scales (tensors 0..5), and an
// unquantized tensor u (6).
std::vector<TensorSpec> tensors() {
  std::vector<TensorSpec> out;
  for (const std::string name : {"a", "b", "c"}) {
    out.push_back(TensorSpec{
        .name = name, .shape = {128, 128}, .dtype = DType::kFP8E4M3, .quantization = Quantization{}});
    out.push_back(TensorSpec{.name = name + ".scales",
                             .shape = {1, 1},
                             .dtype = DType::kFP32,
                             .quantization = Quantization{.scales_of = name}});
  }
  out.push_back(TensorSpec{.name = "u", .shape = {128, 128}});
  return out;
}

Segment from_source(std::uint32_t tensor) { return Segment{tensor, Box{{0, 0}, {1, 1}}, kFromSourceShard}; }

Transfer transfer(std::int32_t id, std::int32_t from, std::int32_t to, std::vector<Segment> segments,
                  std::int64_t bytes) {
  return Transfer{id,           Rank{from},  Rank{to}, LinkKind::kNetwork, std::move(segments),
                  Bytes{bytes}, Bytes{bytes}};
}

// Every chunk of transfer t starts at start[t], plus a thousandth per chunk.
ChunkStart at_given(std::vector<double> start) {
  return [start](std::int32_t t, std::int64_t chunk, std::int64_t) {
    return start[static_cast<std::size_t>(t)] + 1e-3 * static_cast<double>(chunk);
  };
}

TEST(SenderQuantizeOrder, BoxesGoInTheOrderTheirFirstChunkStarts) {
  // Rank 0 sends: #0 u to rank 2 (no box), #1 c's scales to rank 2, #2 a and c to rank 3,
  // #3 b to rank 2. Rank 1 sends #4 a (via #2: forwarded, not its own box) to rank 3. Every
  // message is one chunk (1-element segments, staging 1 MiB). Starts (given): #0 0, #1 0.1,
  // #2 0, #3 0.5. First reads: a 0 (#2), c 0 (#2, before #1's 0.1), b 0.5. Order: a, c (tie at 0
  // by tensor), b. #1 waits for c (2 boxes), #2 for a and c (2), #3 for b (3), all at chunk 0.
  Plan plan{.strategy = "hand", .tensors = tensors(), .source_ranks = 2, .destination_ranks = 2};
  plan.transfers = {transfer(0, 0, 2, {from_source(6)}, 2), transfer(1, 0, 2, {from_source(5)}, 4),
                    transfer(2, 0, 3, {from_source(0), from_source(4)}, 5),
                    transfer(3, 0, 2, {from_source(2)}, 1),
                    transfer(4, 1, 3, {Segment{0, Box{{0, 0}, {1, 1}}, 2}}, 1)};
  const auto order = sender_quantize_order(plan, Bytes{1 << 20}, at_given({0, 0.1, 0, 0.5, 0}));
  EXPECT_EQ(order.weights[0], (std::vector<std::uint32_t>{0, 4, 2}));
  EXPECT_TRUE(order.weights[1].empty());
  using W = std::vector<QuantizeWait>;
  EXPECT_EQ(order.waits[0], W{});
  EXPECT_EQ(order.waits[1], (W{{.chunk = 0, .boxes = 2}}));
  EXPECT_EQ(order.waits[2], (W{{.chunk = 0, .boxes = 2}}));
  EXPECT_EQ(order.waits[3], (W{{.chunk = 0, .boxes = 3}}));
  EXPECT_EQ(order.waits[4], W{});
  EXPECT_EQ(order.needs(3, 0), 3);
  EXPECT_EQ(order.needs(0, 0), 0);
}

TEST(SenderQuantizeOrder, AChunkWaitsOnlyForTheBoxesItsBytesComeFrom) {
  // One message from rank 0 to rank 2 with a's [64, 128] fp8 values (8192 bytes), then b's:
  // 16384 bytes in chunks of 4096 (staging 8192), a in chunks 0-1 and b in chunks 2-3. Rank 0
  // quantizes a, then b (b's first chunk starts later). Chunk 0 waits for a (1 box); chunk 2
  // for b too (2); chunks 1 and 3 for nothing more.
  Plan plan{.strategy = "hand", .tensors = tensors(), .source_ranks = 2, .destination_ranks = 2};
  const Box half{{0, 0}, {64, 128}};
  plan.transfers = {
      transfer(0, 0, 2, {Segment{0, half, kFromSourceShard}, Segment{2, half, kFromSourceShard}}, 16384)};
  const auto order = sender_quantize_order(plan, Bytes{8192}, at_given({0}));
  EXPECT_EQ(order.weights[0], (std::vector<std::uint32_t>{0, 2}));
  EXPECT_EQ(order.waits[0], (std::vector<QuantizeWait>{{.chunk = 0, .boxes = 1}, {.chunk = 2, .boxes = 2}}));
  EXPECT_EQ(order.needs(0, 1), 1);
  EXPECT_EQ(order.needs(0, 3), 2);
}

TEST(SenderQuantizeOrder, PacedStartsAreTheBytesBeforeEachChunkInItsPair) {
  // Pair 0 -> 2 sends #0 (10 bytes) then #1 (30): #1's byte 6 starts at (10 + 6) / 40. Pair
  // 0 -> 3 sends #2 alone: its byte 5 at 5 / 10. Pair 1 -> 3 sends #3 (20) then #4 (20): #4's
  // first byte at 20 / 40.
  Plan plan{.strategy = "hand", .tensors = tensors(), .source_ranks = 2, .destination_ranks = 2};
  plan.transfers = {transfer(0, 0, 2, {from_source(6)}, 10), transfer(1, 0, 2, {from_source(6)}, 30),
                    transfer(2, 0, 3, {from_source(6)}, 10), transfer(3, 1, 3, {from_source(6)}, 20),
                    transfer(4, 1, 3, {from_source(6)}, 20)};
  const auto start = paced_start(plan);
  EXPECT_DOUBLE_EQ(start(0, 0, 0), 0.0);
  EXPECT_DOUBLE_EQ(start(1, 1, 6), 16.0 / 40);
  EXPECT_DOUBLE_EQ(start(2, 0, 5), 0.5);
  EXPECT_DOUBLE_EQ(start(4, 0, 0), 0.5);
}

}  // namespace
}  // namespace refit::lowering
