// The codec's choice of format per chunk: the smallest of the candidates it considers, never
// larger than the dense bytes, and the crossovers the sizes imply.
#include <random>

#include <gtest/gtest.h>

#include "chunk_data.h"
#include "error_code.h"
#include "refit/delta/synthetic_update.h"

namespace refit {
namespace {

using testing::ByteVector;
using testing::ChunkPair;

std::int64_t payload_bytes(const ChunkPair& c, const DeltaEncodeOptions& options) {
  DeltaCodec codec(options);
  ByteVector out(static_cast<std::size_t>(
      delta_payload_capacity(static_cast<std::int64_t>(c.current.size()), dtype_size(c.dtype))));
  const auto header = codec.encode(
      {.baseline = c.baseline, .current = c.current, .dtype = c.dtype, .base = checksum_of(c.baseline)}, out);
  EXPECT_TRUE(header) << header.error().message;
  return header ? header->payload_bytes() : 0;
}

std::int64_t forced(const ChunkPair& c, DeltaEncoding encoding, DeltaEntropy entropy = DeltaEntropy::kNone) {
  return payload_bytes(c, {.format = DeltaFormat{encoding, entropy}});
}

// An RL-like step of a bf16 or fp32 chunk of `elements` (synthetic_update.h).
ChunkPair rl_step(DType dtype, std::int64_t elements, double fraction) {
  ChunkPair c{.name = "rl step", .dtype = dtype, .baseline = ByteVector(elements * dtype_size(dtype))};
  EXPECT_TRUE(fill_synthetic_weights(c.baseline, dtype, 0, 1));
  c.current = c.baseline;
  EXPECT_TRUE(apply_synthetic_step(c.current, dtype, 0, {.change_fraction = fraction, .seed = 2}, 1));
  return c;
}

TEST(DeltaChoice, IsTheSmallestCandidate) {
  // The candidates: dense, bitmask and runs as they are, and the smaller of bitmask and runs
  // packed by zstd; the choice is the smallest of the four (and never more than dense).
  std::vector<ChunkPair> chunks;
  for (const double f : {0.0, 0.001, 0.01, 0.05, 0.2, 0.5, 1.0}) {
    chunks.push_back(rl_step(DType::kBF16, 40000, f));
    chunks.push_back(rl_step(DType::kFP32, 20000, f));
  }
  for (const auto& c : testing::adversarial_pairs(DType::kBF16, 30001, 3)) chunks.push_back(c);
  for (const auto& c : chunks) {
    SCOPED_TRACE(c.name + " " + std::to_string(testing::changed_elements(c)) + " changed");
    const std::int64_t dense = forced(c, DeltaEncoding::kDense);
    const std::int64_t bitmask = forced(c, DeltaEncoding::kBitmask);
    const std::int64_t runs = forced(c, DeltaEncoding::kRuns);
    std::int64_t best = std::min({dense, bitmask, runs});
    if (testing::changed_elements(c) > 0)
      best = std::min(best, forced(c, runs <= bitmask ? DeltaEncoding::kRuns : DeltaEncoding::kBitmask,
                                   DeltaEntropy::kZstd));
    EXPECT_EQ(payload_bytes(c, {}), best);
    EXPECT_LE(payload_bytes(c, {}), kDeltaHeaderBytes + static_cast<std::int64_t>(c.current.size()));
    // Without the entropy stage: the smallest raw encoding.
    EXPECT_EQ(payload_bytes(c, {.entropy = false}), std::min({dense, bitmask, runs}));
  }
}

TEST(DeltaChoice, SizesFollowTheirFormulas) {
  // n bf16 elements, k changed in lone runs with gaps under 64: dense 2n, bitmask ceil(n/8) + 2k,
  // runs k (one varint byte each) + 2k; all plus the 56-byte header.
  const std::int64_t n = 1000;
  std::mt19937_64 rng(9);
  const ChunkPair c = testing::make_pair("every tenth", DType::kBF16, n, rng,
                                         [](auto i, auto b) { return i % 10 == 5 ? b ^ 3 : b; });
  const std::int64_t k = 100;
  EXPECT_EQ(forced(c, DeltaEncoding::kDense), kDeltaHeaderBytes + 2 * n);
  EXPECT_EQ(forced(c, DeltaEncoding::kBitmask), kDeltaHeaderBytes + (n + 7) / 8 + 2 * k);
  EXPECT_EQ(forced(c, DeltaEncoding::kRuns), kDeltaHeaderBytes + k + 2 * k);
}

TEST(DeltaChoice, DenseWinsWhenEverythingChangesAtRandom) {
  // Random new bits in every element: no encoding beats the bytes themselves (zstd cannot pack
  // random XORs), so the choice is dense.
  std::mt19937_64 rng(10);
  const ChunkPair c =
      testing::make_pair("random", DType::kBF16, 20000, rng, [&](auto, auto b) { return b ^ (rng() | 1); });
  DeltaCodec codec;
  ByteVector out(kDeltaHeaderBytes + c.current.size());
  const auto header = codec.encode(
      {.baseline = c.baseline, .current = c.current, .dtype = c.dtype, .base = checksum_of(c.baseline)}, out);
  ASSERT_TRUE(header) << header.error().message;
  EXPECT_EQ(header->format, DeltaFormat{});
}

TEST(DeltaChoice, RawCrossovers) {
  // n = 40000 bf16 elements; without the entropy stage the bodies take, in bytes:
  //   dense 2n; bitmask n/8 + 2k; runs 2k plus, per run, one byte (gap * 2 + 1 < 128) and one more
  //   when it is longer than one element (length - 2 < 128).
  // Every 40th changed (k = n/40, lone runs):    runs 3n/40 = 0.075n < bitmask 0.175n.
  // Every 4th changed (k = n/4, lone runs):      bitmask 0.625n < runs 0.75n.
  // All but 2 of every 40 (runs of 38, gaps 2): runs 1.9n + 2n/40 = 1.95n < dense 2n < bitmask 2.025n.
  // All changed (one run):                      dense 2n < runs 2n + 4 < bitmask 2.125n.
  // So runs wins at both ends, bitmask in between, and dense only when (almost) everything changed.
  const std::int64_t n = 40000;
  const std::pair<testing::ElementRule, std::pair<DeltaEncoding, std::int64_t>> cases[] = {
      {[](auto i, auto b) { return i % 40 == 0 ? b ^ 1 : b; }, {DeltaEncoding::kRuns, 3 * n / 40}},
      {[](auto i, auto b) { return i % 4 == 0 ? b ^ 1 : b; }, {DeltaEncoding::kBitmask, n / 8 + n / 2}},
      {[](auto i, auto b) { return i % 40 < 38 ? b ^ 1 : b; },
       {DeltaEncoding::kRuns, 2 * (n / 40 * 38) + 2 * n / 40}},
      {[](auto, auto b) { return b ^ 1; }, {DeltaEncoding::kDense, 2 * n}},
  };
  std::mt19937_64 rng(13);
  for (const auto& [change, expected] : cases) {
    const ChunkPair c = testing::make_pair("pattern", DType::kBF16, n, rng, change);
    DeltaCodec codec({.entropy = false});
    ByteVector out(kDeltaHeaderBytes + c.current.size());
    const auto header = codec.encode(
        {.baseline = c.baseline, .current = c.current, .dtype = c.dtype, .base = checksum_of(c.baseline)},
        out);
    ASSERT_TRUE(header) << header.error().message;
    EXPECT_EQ(header->format.encoding, expected.first) << delta_encoding_name(expected.first);
    EXPECT_EQ(header->body_bytes, expected.second) << delta_encoding_name(expected.first);
  }
}

TEST(DeltaChoice, EncodingFailsCleanlyWhenTheBufferIsTooSmall) {
  std::mt19937_64 rng(12);
  const ChunkPair c =
      testing::make_pair("some", DType::kBF16, 1000, rng, [](auto i, auto b) { return i % 2 ? b : b ^ 1; });
  DeltaCodec codec;
  ByteVector out(kDeltaHeaderBytes + c.current.size() - 1);
  const auto header = codec.encode({.baseline = c.baseline,
                                    .current = c.current,
                                    .dtype = c.dtype,
                                    .base = checksum_of(c.baseline),
                                    .name = "tensor 'w' chunk 0"},
                                   out);
  ASSERT_EQ(testing::error_code(header), ErrorCode::kOutOfRange);
  EXPECT_EQ(header.error().message.rfind("tensor 'w' chunk 0: ", 0), 0u) << header.error().message;
}

}  // namespace
}  // namespace refit
