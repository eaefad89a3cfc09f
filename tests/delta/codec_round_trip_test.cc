// Every format of the delta codec round trips bit for bit: decode(encode(a, b), a) == b, for
// every element width refit moves (fp8 and int8 values and e8m0 scales: 1 byte; bf16, fp16: 2;
// fp32 scales: 4; fp64: 8) and for the changes that break value-based codecs (NaN payloads, signed
// zeros, denormals), and for random chunks of every size against brute force.
#include <random>

#include <gtest/gtest.h>

#include "chunk_data.h"

namespace refit {
namespace {

using testing::ChunkPair;
using testing::expect_round_trip;

constexpr DType kWidths[] = {DType::kFP8E4M3, DType::kBF16, DType::kFP16, DType::kFP32, DType::kFP64};

std::vector<std::optional<DeltaFormat>> every_format_and_the_choice() {
  std::vector<std::optional<DeltaFormat>> out = {std::nullopt};
  for (const auto encoding : all_delta_encodings())
    for (const auto entropy : all_delta_entropies()) out.push_back(DeltaFormat{encoding, entropy});
  return out;
}

std::string format_label(const std::optional<DeltaFormat>& f) {
  return f ? delta_format_name(*f) : "smallest";
}

TEST(DeltaRoundTrip, EveryFormatRestoresAdversarialChanges) {
  // 50,001 elements: an odd count (a partial last word and mask byte) with room for the gaps of
  // 20,000 elements that need three-byte varints.
  for (const auto& format : every_format_and_the_choice()) {
    DeltaCodec codec({.format = format});
    for (const DType dtype : kWidths)
      for (const ChunkPair& c : testing::adversarial_pairs(dtype, 50001, 7)) {
        SCOPED_TRACE(format_label(format));
        const DeltaHeader header = expect_round_trip(codec, c);
        EXPECT_EQ(header.changed_elements, testing::changed_elements(c)) << c.name;
        if (format) EXPECT_EQ(header.format, *format);
      }
  }
}

TEST(DeltaRoundTrip, RandomChunksOfEverySizeAgainstBruteForce) {
  // 600 random cases: a width, 0..300 elements, a change probability, changes by a random XOR
  // or +-1; every format and the choice decode to the current bytes, and count the changed
  // elements as the brute-force comparison does.
  std::mt19937_64 rng(11);
  std::vector<DeltaCodec> codecs;
  for (const auto& format : every_format_and_the_choice())
    codecs.emplace_back(DeltaEncodeOptions{.format = format});
  for (int trial = 0; trial < 600; ++trial) {
    const DType dtype = kWidths[rng() % std::size(kWidths)];
    const auto elements = static_cast<std::int64_t>(rng() % 301);
    const double p = std::uniform_real_distribution<double>(0, 1)(rng);
    const bool plus_one = rng() % 2 == 0;
    const ChunkPair c = testing::make_pair("trial " + std::to_string(trial), dtype, elements, rng,
                                           [&](auto, std::uint64_t b) -> std::uint64_t {
                                             if (std::uniform_real_distribution<double>(0, 1)(rng) >= p)
                                               return b;
                                             return plus_one ? b + 1 : b ^ (rng() | 1);
                                           });
    for (auto& codec : codecs) {
      SCOPED_TRACE(format_label(codec.options().format));
      EXPECT_EQ(expect_round_trip(codec, c).changed_elements, testing::changed_elements(c)) << c.name;
    }
  }
}

TEST(DeltaRoundTrip, EveryFormatTakesAnEmptyChunk) {
  // A chunk of no elements (a zero-size tensor's piece): a payload of the header and nothing, or
  // an empty zstd frame; nothing changed.
  std::mt19937_64 rng(6);
  for (const auto& format : every_format_and_the_choice()) {
    DeltaCodec codec({.format = format});
    for (const DType dtype : kWidths) {
      SCOPED_TRACE(format_label(format));
      EXPECT_EQ(
          expect_round_trip(codec, testing::make_pair("empty", dtype, 0, rng, [](auto, auto b) { return b; }))
              .changed_elements,
          0);
    }
  }
}

TEST(DeltaRoundTrip, FullRefitNeedsNoBaseline) {
  // No base at the sender: a dense payload, which a receiver without a baseline (or with any
  // other) applies; every element counts as changed.
  std::mt19937_64 rng(5);
  const auto current = testing::random_bytes(1002, rng);
  testing::ByteVector payload(kDeltaHeaderBytes + current.size());
  DeltaCodec codec;
  const auto header = codec.encode({.current = current, .dtype = DType::kBF16}, payload);
  ASSERT_TRUE(header) << header.error().message;
  EXPECT_EQ(header->format, DeltaFormat{});
  EXPECT_EQ(header->changed_elements, 501);
  auto receiver = testing::random_bytes(1002, rng);
  const auto result = codec.decode(payload, {.bytes = receiver, .dtype = DType::kBF16, .name = "w"});
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_TRUE(receiver == current);
  EXPECT_EQ(*result, checksum_of(current));
}

}  // namespace
}  // namespace refit
