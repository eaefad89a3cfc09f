#pragma once
// The encodings of a chunk's body, as a table whose entries carry their own behaviour: the codec
// sizes every entry from one scan's statistics, writes the smallest, and decodes a payload with
// the entry its header names, never switching on the encoding itself.
#include <cstdint>
#include <span>

#include "change_scan.h"
#include "refit/core/error.h"
#include "refit/delta/payload.h"

namespace refit::delta {

struct PositionCoder {
  DeltaEncoding id;
  // False for dense: its body is the chunk itself, whatever the receiver holds.
  bool needs_baseline = true;
  // The exact size of the body for a chunk with these changes.
  std::int64_t (*body_bytes)(const ChangeStats& stats);
  // Writes the body into `out` (body_bytes(stats) long).
  void (*write)(std::span<const std::byte> baseline, std::span<const std::byte> current,
                const ChangeStats& stats, std::span<std::byte> out);
  // Checks the (inner) body against its header, reading the receiver's `bytes` (whose checksum is
  // `base`) and writing nothing; the checksum `bytes` will have once the body is applied.
  Result<Checksum> (*check)(std::span<const std::byte> body, const DeltaHeader& header,
                            std::span<const std::byte> bytes, Checksum base);
  // Applies a body that check() accepted.
  void (*apply)(std::span<const std::byte> body, const DeltaHeader& header, std::span<std::byte> bytes);
};

const PositionCoder& dense_coder();
const PositionCoder& bitmask_coder();
const PositionCoder& runs_coder();

// Every encoding, in DeltaEncoding order.
std::span<const PositionCoder* const> position_coders();
const PositionCoder& position_coder(DeltaEncoding encoding);

}  // namespace refit::delta
