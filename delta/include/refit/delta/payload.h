#pragma once
// The payload of one chunk of a delta refit: a fixed header, then a body that an encoding (which
// elements changed, and how) wrote and an optional entropy stage packed. docs/delta.md shows the
// byte layout; read_delta_header checks every field that can be checked without the receiver's
// chunk, so a corrupt or truncated payload is refused before any byte of the chunk is read.
#include <compare>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "refit/core/error.h"
#include "refit/delta/checksum.h"

namespace refit {

// How the body says what the chunk holds now.
enum class DeltaEncoding : std::uint8_t {
  kDense,    // the chunk's bytes as they are now: needs no baseline (a full refit)
  kBitmask,  // one bit per element (set: it changed), then the changed elements' XOR with the baseline
  kRuns,     // the runs of changed elements as varint (gap, length) pairs, then their XOR values
};

// What packs the body the encoding wrote.
enum class DeltaEntropy : std::uint8_t {
  kNone,  // nothing: the body is the encoding's
  kZstd,  // one zstd frame of it
};

struct DeltaFormat {
  DeltaEncoding encoding = DeltaEncoding::kDense;
  DeltaEntropy entropy = DeltaEntropy::kNone;
  constexpr bool operator==(const DeltaFormat&) const = default;
};

// "dense", "bitmask", "runs"; "none", "zstd"; a format as "runs+zstd" (or "runs" without a stage).
std::string_view delta_encoding_name(DeltaEncoding encoding);
std::string_view delta_entropy_name(DeltaEntropy entropy);
std::string delta_format_name(DeltaFormat format);
std::span<const DeltaEncoding> all_delta_encodings();
std::span<const DeltaEntropy> all_delta_entropies();

// What the header of a payload says. Sizes are bytes unless named elements.
struct DeltaHeader {
  DeltaFormat format;
  std::int64_t element_bytes = 0;     // 1, 2, 4 or 8: the unit a change is counted in
  std::int64_t chunk_bytes = 0;       // the chunk's size, a multiple of element_bytes
  std::int64_t changed_elements = 0;  // elements whose bits differ from the baseline (all, when there
                                      // was none)
  std::int64_t inner_bytes = 0;       // the body's size before the entropy stage (body_bytes without one)
  std::int64_t body_bytes = 0;        // the bytes after the header
  Checksum base;                      // the checksum of the baseline the body applies to (dense: the
                                      // sender's, informative only)
  Checksum result;                    // the chunk's checksum once the body is applied

  std::int64_t payload_bytes() const;
};

inline constexpr std::int64_t kDeltaHeaderBytes = 56;

// The largest payload any format can make of a chunk of `chunk_bytes` in elements of
// `element_bytes`: what a buffer that encode() may fill must hold. The smallest format, encode()'s
// default choice, never needs more than kDeltaHeaderBytes + chunk_bytes.
std::int64_t delta_payload_capacity(std::int64_t chunk_bytes, std::int64_t element_bytes);

// Writes `header` into the first kDeltaHeaderBytes of `out` (which holds at least that many).
void write_delta_header(const DeltaHeader& header, std::span<std::byte> out);

// The header of `payload`, checked: its magic and version, known encoding and stage, an element
// size of 1, 2, 4 or 8, sizes that agree with each other and with the payload's length.
[[nodiscard]] Result<DeltaHeader> read_delta_header(std::span<const std::byte> payload);
// The same, from the payload's first kDeltaHeaderBytes (`header`) and its length: for a payload
// that lies elsewhere (device memory) and whose header alone was copied out.
[[nodiscard]] Result<DeltaHeader> read_delta_header(std::span<const std::byte> header,
                                                    std::int64_t payload_bytes);

}  // namespace refit
