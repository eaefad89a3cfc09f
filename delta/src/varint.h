#pragma once
// A varint (refit/delta/run_positions.h) taken from the front of a span.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "refit/delta/run_positions.h"

namespace refit::delta {

// Reads a varint from the front of `in` and drops it from `in`; nullopt when `in` ends inside one
// or it does not fit 64 bits.
inline std::optional<std::uint64_t> take_varint(std::span<const std::byte>& in) {
  std::uint64_t v = 0;
  const std::int64_t took = read_varint(in.data(), static_cast<std::int64_t>(in.size()), v);
  if (took == 0) return std::nullopt;
  in = in.subspan(static_cast<std::size_t>(took));
  return v;
}

}  // namespace refit::delta
