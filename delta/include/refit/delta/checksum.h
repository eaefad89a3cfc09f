#pragma once
// The checksum a sender and a receiver compare, per chunk, to know that they hold the same
// baseline. It is the wrapping sum, over the chunk's 8-byte words (the last one padded with
// zeros), of checksum_term(word, index): a sum so that a step that changes k words updates it in
// O(k) from the checksum before (replace_word), and so that a GPU can compute it as a parallel
// reduction; each term is a bijection of its word (a changed word always changes its term) keyed by
// its index (moved words change the sum). Not cryptographic: it tells honest mistakes apart (two
// different chunks of the same size agree with probability about 2^-64), nothing more.
// docs/delta.md has its speed and why it was chosen over a streaming hash.
#include <compare>
#include <cstddef>
#include <cstdint>
#include <span>

#include "refit/delta/mix64.h"

namespace refit {

struct Checksum {
  std::uint64_t value = 0;
  constexpr auto operator<=>(const Checksum&) const = default;
};

namespace delta {

// The term of word `index` (0 for the chunk's first 8 bytes) holding `word` (little-endian).
REFIT_DELTA_HD inline constexpr std::uint64_t checksum_term(std::uint64_t word, std::uint64_t index) {
  return mix64(word ^ ((index + 1) * kGolden));
}

}  // namespace delta

// The checksum of `bytes`, computed from all of them.
Checksum checksum_of(std::span<const std::byte> bytes);

// The checksum after word `index` changed from `before` to `after`, from the checksum `sum` before.
inline constexpr Checksum replace_word(Checksum sum, std::uint64_t index, std::uint64_t before,
                                       std::uint64_t after) {
  return Checksum{sum.value - delta::checksum_term(before, index) + delta::checksum_term(after, index)};
}

}  // namespace refit
