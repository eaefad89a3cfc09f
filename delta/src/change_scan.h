#pragma once
// The sender's pass over a chunk's baseline and current bytes: which elements changed, how much
// each encoding's body would take, and the checksum of the current bytes, all in one pass.
#include <cstdint>
#include <span>

#include "refit/delta/checksum.h"
#include "words.h"

namespace refit::delta {

// Calls f(word index, baseline word, current word) for every 8-byte word that differs, in order.
// The two spans have the same size.
template <class F>
void for_each_changed_word(std::span<const std::byte> baseline, std::span<const std::byte> current, F&& f) {
  const auto size = static_cast<std::int64_t>(current.size());
  const std::int64_t full = size / 8;
  for (std::int64_t i = 0; i < full; ++i) {
    const std::uint64_t a = load_full_word(baseline.data(), i);
    const std::uint64_t b = load_full_word(current.data(), i);
    if (a != b) f(i, a, b);
  }
  if (full < word_count(size)) {
    const std::uint64_t a = load_word(baseline, full);
    const std::uint64_t b = load_word(current, full);
    if (a != b) f(full, a, b);
  }
}

// Calls f(element index, its bits' XOR) for each element of type T that differs in word `word`,
// whose baseline and current bits XOR to `x`.
template <class T, class F>
void for_each_changed_in_word(std::int64_t word, std::uint64_t x, F&& f) {
  constexpr int kPerWord = 8 / sizeof(T);
  for (int e = 0; e < kPerWord; ++e) {
    const auto v = static_cast<T>(x >> (8 * sizeof(T) * e));
    if (v != 0) f(word * kPerWord + e, v);
  }
}

// Calls f(element index, baseline ^ current) for every element of type T whose bits differ, in
// order (the zero padding of the last word never differs).
template <class T, class F>
void for_each_changed_element(std::span<const std::byte> baseline, std::span<const std::byte> current,
                              F&& f) {
  for_each_changed_word(baseline, current, [&](std::int64_t word, std::uint64_t a, std::uint64_t b) {
    for_each_changed_in_word<T>(word, a ^ b, f);
  });
}

// What the encodings need to know of a chunk's changes to size their bodies.
struct ChangeStats {
  std::int64_t elements = 0;
  std::int64_t element_bytes = 0;
  std::int64_t changed = 0;             // elements whose bits differ
  std::int64_t run_position_bytes = 0;  // the positions the runs encoding writes for them
};

struct ChangeScan {
  ChangeStats stats;
  Checksum result;  // the checksum of the current bytes
};

// One pass over both: the statistics, and the current bytes' checksum from the baseline's (`base`).
ChangeScan scan_changes(std::span<const std::byte> baseline, std::span<const std::byte> current,
                        std::int64_t element_bytes, Checksum base);

}  // namespace refit::delta
