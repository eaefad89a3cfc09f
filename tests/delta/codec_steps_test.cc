// The baseline over many steps: a receiver that applies every step's payload holds the sender's
// bytes bit for bit, and the checksums both sides keep stay those of the bytes (no drift); a
// receiver whose baseline differs is refused and repaired by a full refit; a step that fails
// leaves the receiver's bytes as they were.
#include <gtest/gtest.h>

#include "chunk_data.h"
#include "error_code.h"
#include "refit/delta/baseline.h"
#include "refit/delta/synthetic_update.h"

namespace refit {
namespace {

using testing::ByteVector;
using testing::error_code;

// One chunk at both ends of a delta refit, moved step by step as the executors will: the sender
// keeps the bytes it last sent and their checksum, the receiver its bytes and their checksum; both
// adopt the new checksum once the receiver applied the payload (baseline.h).
struct Link {
  DType dtype;
  ByteVector sender_baseline;
  std::optional<Checksum> sender_base;
  ByteVector receiver;
  std::optional<Checksum> receiver_base;
  DeltaCodec codec;
  ByteVector payload;

  explicit Link(DType t, std::int64_t elements)
      : dtype(t), sender_baseline(elements * dtype_size(t)), receiver(elements * dtype_size(t)) {
    payload.resize(kDeltaHeaderBytes + receiver.size());
  }

  Result<DeltaHeader> encode(const ByteVector& current) {
    return codec.encode(
        {.baseline = sender_baseline, .current = current, .dtype = dtype, .base = sender_base, .name = "w"},
        payload);
  }
  Result<Checksum> decode(std::int64_t payload_bytes) {
    return codec.decode(std::span(payload).first(static_cast<std::size_t>(payload_bytes)),
                        {.bytes = receiver, .dtype = dtype, .base = receiver_base, .name = "w"});
  }
  // The first step: synthetic weights (seed `seed`) sent in full; they are returned.
  ByteVector start(std::uint64_t seed) {
    ByteVector current(receiver.size());
    EXPECT_TRUE(fill_synthetic_weights(current, dtype, 0, seed));
    step(current);
    return current;
  }
  // Decodes the payload of `current` and expects it refused, saying `says`, the bytes untouched.
  void expect_refused(const ByteVector& current, const std::string& says) {
    const auto header = encode(current);
    ASSERT_TRUE(header) << header.error().message;
    const ByteVector before = receiver;
    const auto refused = decode(header->payload_bytes());
    ASSERT_EQ(error_code(refused), ErrorCode::kMismatch);
    EXPECT_NE(refused.error().message.find(says), std::string::npos) << refused.error().message;
    EXPECT_TRUE(receiver == before);
  }
  // A step that succeeds end to end: both sides commit.
  DeltaHeader step(const ByteVector& current) {
    const auto header = encode(current);
    EXPECT_TRUE(header) << header.error().message;
    const auto result = decode(header->payload_bytes());
    EXPECT_TRUE(result) << result.error().message;
    sender_baseline = current;
    sender_base = header->result;
    receiver_base = *result;
    return *header;
  }
};

TEST(DeltaSteps, HundredRlStepsStayExactWithoutDrift) {
  // 100 steps of a synthetic RL update (2 % of elements per step) on a bf16 and an fp32 chunk:
  // after every step the receiver's bytes are the sender's, and the checksum each side kept
  // (updated in O(changed) words, never recomputed) equals checksum_of(the bytes).
  for (const DType dtype : {DType::kBF16, DType::kFP32}) {
    SCOPED_TRACE(dtype_name(dtype));
    Link link(dtype, 30011);
    ByteVector current(link.receiver.size());
    ASSERT_TRUE(fill_synthetic_weights(current, dtype, 0, 3));
    EXPECT_EQ(link.step(current).format, DeltaFormat{}) << "the first step is a full refit";
    for (std::int64_t step = 1; step <= 100; ++step) {
      ASSERT_TRUE(apply_synthetic_step(current, dtype, 0, {.change_fraction = 0.02, .seed = 4}, step));
      const DeltaHeader header = link.step(current);
      ASSERT_TRUE(link.receiver == current) << "step " << step;
      ASSERT_EQ(link.receiver_base, checksum_of(link.receiver)) << "step " << step;
      ASSERT_EQ(link.sender_base, link.receiver_base) << "step " << step;
      EXPECT_NE(header.format.encoding, DeltaEncoding::kDense) << "step " << step;
    }
  }
}

TEST(DeltaSteps, AReceiverWhoseBaselineDiffersIsRefusedThenRepaired) {
  // The receiver's bytes change outside refit and its audit (checksum_of) notices: the next delta
  // is refused as "full refit needed" with its bytes untouched; a full refit repairs it.
  Link link(DType::kBF16, 4096);
  ByteVector current = link.start(5);
  link.receiver[100] ^= std::byte{1};
  link.receiver_base = checksum_of(link.receiver);
  ASSERT_TRUE(apply_synthetic_step(current, DType::kBF16, 0, {.change_fraction = 0.05}, 1));
  link.expect_refused(current, "w: the receiver's baseline");
  link.expect_refused(current, "a full refit is needed");
  // Both sides drop their baselines; the full refit that follows restores the receiver.
  link.sender_base.reset();
  link.receiver_base.reset();
  EXPECT_EQ(link.step(current).format, DeltaFormat{});
  EXPECT_TRUE(link.receiver == current);
  EXPECT_EQ(link.receiver_base, checksum_of(current));
}

TEST(DeltaSteps, AnUnauditedChangeUnderADeltaIsCaughtByTheResultChecksum) {
  // Without an audit the receiver's kept checksum is stale; where the delta changes a word the
  // receiver's bytes no longer match, the result's checksum differs from the sender's and the
  // payload is refused, bytes untouched. (A change where no delta lands needs the audit.)
  Link link(DType::kBF16, 64);
  ByteVector current = link.start(6);
  current[10] ^= std::byte{1};       // the sender changes element 5 (word 1)
  link.receiver[8] ^= std::byte{4};  // the receiver's element 4 (same word) changed unnoticed
  link.expect_refused(current, "is not the sender's");
}

TEST(DeltaSteps, WithoutABaselineOnlyAFullRefitApplies) {
  Link link(DType::kFP32, 256);
  ByteVector current = link.start(7);
  ASSERT_TRUE(apply_synthetic_step(current, DType::kFP32, 0, {.change_fraction = 0.1}, 1));
  link.receiver_base.reset();  // e.g. a receiver that restarted
  link.expect_refused(current, "the receiver has no baseline");
}

TEST(DeltaSteps, AFailedStepLeavesTheReceiverAsItWasAndAFullRefitFollows) {
  // Failure mid-step: the payload arrives damaged (a value byte flipped). The receiver refuses it
  // and keeps its bytes; both sides mark the chunk for a full refit; the next step is exact.
  Link link(DType::kBF16, 8192);
  ByteVector current = link.start(8);
  ASSERT_TRUE(apply_synthetic_step(current, DType::kBF16, 0, {.change_fraction = 0.01}, 1));
  DeltaCodec raw({.entropy = false});  // values sit in the body as they are: flip the last one
  const auto header = raw.encode(
      {.baseline = link.sender_baseline, .current = current, .dtype = DType::kBF16, .base = link.sender_base},
      link.payload);
  ASSERT_TRUE(header);
  link.payload[static_cast<std::size_t>(header->payload_bytes() - 1)] ^= std::byte{0x10};
  const ByteVector before = link.receiver;
  ASSERT_FALSE(link.decode(header->payload_bytes()));
  EXPECT_TRUE(link.receiver == before);
  link.sender_base.reset();
  link.receiver_base.reset();
  ASSERT_TRUE(apply_synthetic_step(current, DType::kBF16, 0, {.change_fraction = 0.01}, 2));
  link.step(current);
  EXPECT_TRUE(link.receiver == current);
}

TEST(DeltaSteps, APayloadForAnotherChunkIsRefused) {
  Link link(DType::kBF16, 100);
  ByteVector current(link.receiver.size());
  ASSERT_TRUE(fill_synthetic_weights(current, DType::kBF16, 0, 9));
  const auto header = link.encode(current);
  ASSERT_TRUE(header);
  ByteVector smaller(198);
  DeltaCodec codec;
  const auto wrong_size = codec.decode(std::span(link.payload).first(header->payload_bytes()),
                                       {.bytes = smaller, .dtype = DType::kBF16, .name = "v"});
  EXPECT_EQ(error_code(wrong_size), ErrorCode::kMismatch);
  const auto wrong_type = codec.decode(std::span(link.payload).first(header->payload_bytes()),
                                       {.bytes = link.receiver, .dtype = DType::kFP32, .name = "v"});
  ASSERT_EQ(error_code(wrong_type), ErrorCode::kMismatch);
  EXPECT_NE(wrong_type.error().message.find("v: a payload in 2-byte elements for a chunk of fp32"),
            std::string::npos)
      << wrong_type.error().message;
}

TEST(DeltaSteps, AChunkTheSenderCannotEncodeIsNamed) {
  // 7 bytes are not whole bf16 elements; a baseline of another size than the chunk cannot be the
  // one it changed from.
  DeltaCodec codec;
  ByteVector out(1024), seven(7), eight(8), ten(10);
  const auto odd = codec.encode({.current = seven, .dtype = DType::kBF16, .name = "w chunk 1"}, out);
  ASSERT_EQ(error_code(odd), ErrorCode::kInvalidArgument);
  EXPECT_EQ(odd.error().message, "w chunk 1: a chunk of 7 bytes is not whole bf16 elements");
  const auto sizes = codec.encode({.baseline = eight,
                                   .current = ten,
                                   .dtype = DType::kBF16,
                                   .base = checksum_of(eight),
                                   .name = "w chunk 2"},
                                  out);
  ASSERT_EQ(error_code(sizes), ErrorCode::kMismatch);
  EXPECT_EQ(sizes.error().message, "w chunk 2: a baseline of 8 bytes for a chunk of 10");
}

TEST(DeltaBaseline, SaysWhenAFullRefitIsNeeded) {
  EXPECT_TRUE(require_same_baseline(Checksum{5}, Checksum{5}, "c"));
  for (const auto& [sender, receiver] :
       {std::pair<std::optional<Checksum>, std::optional<Checksum>>{Checksum{5}, Checksum{6}},
        {std::nullopt, Checksum{6}},
        {Checksum{5}, std::nullopt}}) {
    const auto r = require_same_baseline(sender, receiver, "tensor 'w' chunk 2");
    ASSERT_EQ(error_code(r), ErrorCode::kMismatch);
    EXPECT_EQ(r.error().message.rfind("tensor 'w' chunk 2: ", 0), 0u);
    EXPECT_NE(r.error().message.find("a full refit is needed"), std::string::npos);
  }
}

}  // namespace
}  // namespace refit
