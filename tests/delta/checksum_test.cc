// The chunk checksum (refit/delta/checksum.h) against its definition, and the changes it must see.
#include "refit/delta/checksum.h"

#include <random>
#include <utility>

#include <gtest/gtest.h>

#include "chunk_data.h"

namespace refit {
namespace {

using testing::ByteVector;

// The definition, written out byte by byte: the sum (mod 2^64) over words i of
// checksum_term(word_i, i), word_i being bytes 8i..8i+7 little-endian, missing bytes zero.
Checksum by_definition(const ByteVector& bytes) {
  std::uint64_t sum = 0;
  for (std::size_t i = 0; i * 8 < bytes.size(); ++i) {
    std::uint64_t word = 0;
    for (std::size_t k = 0; k < 8 && i * 8 + k < bytes.size(); ++k)
      word |= static_cast<std::uint64_t>(bytes[i * 8 + k]) << (8 * k);
    sum += delta::checksum_term(word, i);
  }
  return Checksum{sum};
}

TEST(Checksum, MatchesItsDefinitionAtEverySizeUpTo100Bytes) {
  // Sizes 0..100 cover the unrolled loop (4 words), its remainder and a partial last word.
  std::mt19937_64 rng(1);
  for (std::size_t n = 0; n <= 100; ++n) {
    const auto bytes = testing::random_bytes(n, rng);
    EXPECT_EQ(checksum_of(bytes), by_definition(bytes)) << n << " bytes";
  }
  EXPECT_EQ(checksum_of({}), Checksum{0});
}

TEST(Checksum, EverySingleBitFlipChangesIt) {
  // A term is a bijection of its word, so a changed word always changes the sum.
  std::mt19937_64 rng(2);
  auto bytes = testing::random_bytes(45, rng);
  const Checksum before = checksum_of(bytes);
  for (std::size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    bytes[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    EXPECT_NE(checksum_of(bytes), before) << "bit " << bit;
    bytes[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
  }
}

TEST(Checksum, MovedWordsChangeIt) {
  // The terms are keyed by the word's index, so swapping two different words changes the sum.
  std::mt19937_64 rng(3);
  const auto bytes = testing::random_bytes(64, rng);
  const Checksum before = checksum_of(bytes);
  for (std::size_t a = 0; a < 8; ++a)
    for (std::size_t b = a + 1; b < 8; ++b) {
      auto swapped = bytes;
      std::swap_ranges(swapped.begin() + 8 * a, swapped.begin() + 8 * a + 8, swapped.begin() + 8 * b);
      EXPECT_NE(checksum_of(swapped), before) << "words " << a << " and " << b;
    }
}

TEST(Checksum, ReplacingAWordEqualsRecomputing) {
  // sum' = sum - term(old, i) + term(new, i): the O(changed) update both sides keep.
  std::mt19937_64 rng(4);
  auto bytes = testing::random_bytes(8 * 37, rng);
  Checksum kept = checksum_of(bytes);
  for (int change = 0; change < 200; ++change) {
    const std::size_t word = rng() % 37;
    std::uint64_t before, after = rng();
    std::memcpy(&before, bytes.data() + 8 * word, 8);
    std::memcpy(bytes.data() + 8 * word, &after, 8);
    kept = replace_word(kept, word, before, after);
    ASSERT_EQ(kept, checksum_of(bytes)) << "change " << change;
  }
}

}  // namespace
}  // namespace refit
