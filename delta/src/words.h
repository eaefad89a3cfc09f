#pragma once
// A chunk seen as little-endian 8-byte words, the last one padded with zeros: the unit of the
// checksum and of the scan for changes.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace refit::delta {

static_assert(std::endian::native == std::endian::little,
              "payloads and checksums are little-endian and read by memcpy");

inline std::int64_t word_count(std::int64_t bytes) { return (bytes + 7) / 8; }

// Word `index`, which lies wholly inside `bytes` (the fast path of the loops).
inline std::uint64_t load_full_word(const std::byte* bytes, std::int64_t index) {
  std::uint64_t w;
  std::memcpy(&w, bytes + index * 8, 8);
  return w;
}

// Word `index` < word_count(bytes.size()), padded with zeros past the end.
inline std::uint64_t load_word(std::span<const std::byte> bytes, std::int64_t index) {
  const auto first = static_cast<std::size_t>(index) * 8;
  if (first + 8 <= bytes.size()) return load_full_word(bytes.data(), index);
  std::uint64_t w = 0;
  std::memcpy(&w, bytes.data() + first, bytes.size() - first);
  return w;
}

}  // namespace refit::delta
