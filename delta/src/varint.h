#pragma once
// Unsigned LEB128 varints (7 bits a byte, low bits first, the top bit set on every byte but the
// last): the positions of the runs encoding.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace refit::delta {

inline std::int64_t varint_bytes(std::uint64_t v) {
  std::int64_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

// Writes `v` at `out` and returns the byte after it; the caller sized the buffer with varint_bytes.
inline std::byte* put_varint(std::byte* out, std::uint64_t v) {
  for (; v >= 0x80; v >>= 7) *out++ = static_cast<std::byte>(v | 0x80);
  *out++ = static_cast<std::byte>(v);
  return out;
}

// Reads a varint from the front of `in` and drops it from `in`; nullopt when `in` ends inside one
// or it does not fit 64 bits.
inline std::optional<std::uint64_t> take_varint(std::span<const std::byte>& in) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < in.size() && i < 10; ++i) {
    const auto b = static_cast<std::uint8_t>(in[i]);
    if (i == 9 && b > 1) return std::nullopt;
    v |= static_cast<std::uint64_t>(b & 0x7f) << (7 * i);
    if (b < 0x80) {
      in = in.subspan(i + 1);
      return v;
    }
  }
  return std::nullopt;
}

}  // namespace refit::delta
