#pragma once
// The runs encoding's positions (docs/delta.md): the changed elements grouped into runs of
// consecutive indices, each written as varint(gap * 2 + (length > 1)) and, for a run longer than
// one, varint(length - 2), where gap counts the unchanged elements since the previous run (since
// the chunk's start for the first). Varints are unsigned LEB128: 7 bits a byte, low bits first,
// the top bit set on every byte but the last. Written for nvcc too (device_compatible.h): the GPU
// codec writes and reads the same positions.
#include <cstddef>
#include <cstdint>

#include "refit/delta/device_compatible.h"

namespace refit::delta {

struct Run {
  std::int64_t gap = 0;
  std::int64_t length = 0;
};

REFIT_DELTA_HD inline std::int64_t varint_bytes(std::uint64_t v) {
  std::int64_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

// Writes `v` at `out` and returns the byte after it; the caller sized the buffer with varint_bytes.
REFIT_DELTA_HD inline std::byte* put_varint(std::byte* out, std::uint64_t v) {
  for (; v >= 0x80; v >>= 7) *out++ = static_cast<std::byte>(v | 0x80);
  *out++ = static_cast<std::byte>(v);
  return out;
}

// Reads a varint from the `size` bytes at `in` into `v`: the bytes it took, or 0 when they end
// inside one or it does not fit 64 bits (a tenth byte above 1, or more than ten bytes).
REFIT_DELTA_HD inline std::int64_t read_varint(const std::byte* in, std::int64_t size, std::uint64_t& v) {
  v = 0;
  for (std::int64_t i = 0; i < size && i < 10; ++i) {
    const auto b = static_cast<std::uint8_t>(in[i]);
    if (i == 9 && b > 1) return 0;
    v |= static_cast<std::uint64_t>(b & 0x7f) << (7 * i);
    if (b < 0x80) return i + 1;
  }
  return 0;
}

REFIT_DELTA_HD inline std::uint64_t run_head(const Run& run) {
  return static_cast<std::uint64_t>(run.gap) * 2 + (run.length > 1 ? 1 : 0);
}

REFIT_DELTA_HD inline std::int64_t run_position_bytes(const Run& run) {
  return varint_bytes(run_head(run)) +
         (run.length > 1 ? varint_bytes(static_cast<std::uint64_t>(run.length - 2)) : 0);
}

REFIT_DELTA_HD inline std::byte* put_run(std::byte* out, const Run& run) {
  out = put_varint(out, run_head(run));
  return run.length > 1 ? put_varint(out, static_cast<std::uint64_t>(run.length - 2)) : out;
}

}  // namespace refit::delta
