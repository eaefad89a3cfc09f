#include "refit/delta/checksum.h"

#include "words.h"

namespace refit {

Checksum checksum_of(std::span<const std::byte> bytes) {
  const auto size = static_cast<std::int64_t>(bytes.size());
  const std::int64_t full = size / 8;
  // Four sums side by side: the terms are independent, and one chain of adds would wait on each.
  std::uint64_t sums[4] = {0, 0, 0, 0};
  std::int64_t i = 0;
  for (; i + 4 <= full; i += 4)
    for (int lane = 0; lane < 4; ++lane)
      sums[lane] += delta::checksum_term(delta::load_full_word(bytes.data(), i + lane),
                                         static_cast<std::uint64_t>(i + lane));
  std::uint64_t sum = sums[0] + sums[1] + sums[2] + sums[3];
  for (; i < delta::word_count(size); ++i)
    sum += delta::checksum_term(delta::load_word(bytes, i), static_cast<std::uint64_t>(i));
  return Checksum{sum};
}

}  // namespace refit
