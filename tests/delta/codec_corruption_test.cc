// A payload that is cut short or damaged anywhere is refused, never crashes, never writes out of
// bounds (the debug and sanitize builds check that), and leaves the receiver's bytes untouched;
// where the damage is harmless (a field the format does not use) the decode is still exact.
#include <random>

#include <gtest/gtest.h>

#include "chunk_data.h"
#include "error_code.h"

namespace refit {
namespace {

using testing::ByteVector;
using testing::ChunkPair;

struct Encoded {
  ChunkPair chunk;
  ByteVector payload;
};

// A bf16 chunk of 300 elements with about 12 % of them changed by +-1, in `format`.
Encoded encoded(DeltaFormat format) {
  std::mt19937_64 rng(21);
  Encoded e{.chunk = testing::make_pair("c", DType::kBF16, 300, rng,
                                        [&](auto, auto b) { return rng() % 8 == 0 ? b + 1 : b; })};
  DeltaCodec codec({.format = format});
  e.payload.resize(static_cast<std::size_t>(delta_payload_capacity(600, 2)));
  const auto header = codec.encode({.baseline = e.chunk.baseline,
                                    .current = e.chunk.current,
                                    .dtype = DType::kBF16,
                                    .base = checksum_of(e.chunk.baseline)},
                                   e.payload);
  EXPECT_TRUE(header) << header.error().message;
  e.payload.resize(static_cast<std::size_t>(header->payload_bytes()));
  return e;
}

// Decodes `payload` onto a copy of the baseline: either refused as bad input with the bytes
// untouched, or exact. True when refused.
bool refused_or_exact(DeltaCodec& codec, const Encoded& e, std::span<const std::byte> payload,
                      const std::string& what) {
  ByteVector receiver = e.chunk.baseline;
  const auto result = codec.decode(
      payload,
      {.bytes = receiver, .dtype = DType::kBF16, .base = checksum_of(e.chunk.baseline), .name = "c"});
  if (result) {
    EXPECT_TRUE(receiver == e.chunk.current) << what << ": accepted, but not exact";
    return false;
  }
  EXPECT_TRUE(result.error().is_bad_input()) << what << ": " << result.error().message;
  EXPECT_EQ(result.error().message.rfind("c: ", 0), 0u) << what << ": " << result.error().message;
  EXPECT_TRUE(receiver == e.chunk.baseline) << what << ": refused, but the bytes changed";
  return true;
}

std::vector<DeltaFormat> every_format() {
  std::vector<DeltaFormat> out;
  for (const auto encoding : all_delta_encodings())
    for (const auto entropy : all_delta_entropies()) out.push_back({encoding, entropy});
  return out;
}

TEST(DeltaCorruption, EveryTruncationIsRefused) {
  DeltaCodec codec;
  for (const DeltaFormat format : every_format()) {
    const Encoded e = encoded(format);
    for (std::size_t n = 0; n < e.payload.size(); ++n)
      EXPECT_TRUE(refused_or_exact(codec, e, std::span(e.payload).first(n),
                                   delta_format_name(format) + " cut at " + std::to_string(n)));
  }
}

TEST(DeltaCorruption, EveryDamagedByteIsRefusedOrHarmless) {
  // Each byte XORed with 0x01, 0x80 and 0xff in turn: refused with the bytes untouched, or decoded
  // exactly (refused_or_exact checks both). Damage to the header is refused except in the fields
  // the format ignores (dense: the changed count, bytes 16-23, and the base checksum, 40-47); a
  // damaged body may decode only to the same bytes (another encoding of the same changes, which
  // the result's checksum confirms), and rarely: at most 2 % of the cases.
  DeltaCodec codec;
  for (const DeltaFormat format : every_format()) {
    const Encoded e = encoded(format);
    int body_accepted = 0;
    for (std::size_t at = 0; at < e.payload.size(); ++at)
      for (const std::uint8_t flip : {0x01, 0x80, 0xff}) {
        ByteVector damaged = e.payload;
        damaged[at] ^= static_cast<std::byte>(flip);
        const std::string what = delta_format_name(format) + " byte " + std::to_string(at);
        const bool refused = refused_or_exact(codec, e, damaged, what);
        const bool ignored =
            format.encoding == DeltaEncoding::kDense && ((at >= 16 && at < 24) || (at >= 40 && at < 48));
        if (at < kDeltaHeaderBytes && !ignored) EXPECT_TRUE(refused) << what;
        if (at >= kDeltaHeaderBytes && !refused) ++body_accepted;
      }
    EXPECT_LE(body_accepted, 0.02 * 3 * static_cast<double>(e.payload.size() - kDeltaHeaderBytes))
        << delta_format_name(format);
  }
}

TEST(DeltaCorruption, AHeaderClaimingAHugeBodyIsRefusedBeforeAllocating) {
  // A zstd payload whose header says the inner body is larger than any encoding makes of the
  // receiver's chunk is refused by the header check, not by an allocation.
  Encoded e = encoded({DeltaEncoding::kRuns, DeltaEntropy::kZstd});
  const std::uint64_t huge = 1ull << 62;
  std::memcpy(e.payload.data() + 24, &huge, 8);
  DeltaCodec codec;
  EXPECT_TRUE(refused_or_exact(codec, e, e.payload, "huge inner"));
}

}  // namespace
}  // namespace refit
