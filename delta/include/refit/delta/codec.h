#pragma once
// The delta codec of one chunk: the sender encodes what changed since the baseline it shares with
// the receiver (baseline.h), choosing per chunk the smallest of the encodings (payload.h), with the
// dense bytes as the fallback; the receiver applies the payload to its bytes in place, all or
// nothing: a payload that is cut short, corrupt, or meant for another baseline is refused with an
// error naming the chunk, and the bytes are left as they were. Lossless for any bit pattern (NaN
// payloads, -0.0, denormals): elements are compared and changed as bits, never as values.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "refit/core/dtype.h"
#include "refit/core/error.h"
#include "refit/delta/checksum.h"
#include "refit/delta/payload.h"

namespace refit {

namespace delta {
struct CodecState;
}

// One chunk at the sender.
struct DeltaSource {
  std::span<const std::byte> baseline;  // the bytes last sent for this chunk (ignored without `base`)
  std::span<const std::byte> current;   // the bytes to send now
  DType dtype = DType::kBF16;           // a change is counted per element of this type
  std::optional<Checksum> base;         // the baseline's checksum; nullopt: a full refit (dense)
  std::string_view name;                // names the chunk in errors, e.g. "tensor 'w' chunk 3"
};

// One chunk at the receiver.
struct DeltaTarget {
  std::span<std::byte> bytes;    // the receiver's baseline, which decode() turns into the sender's current
  DType dtype = DType::kBF16;    // the element type the sender encoded with
  std::optional<Checksum> base;  // the checksum of `bytes` the receiver keeps; nullopt: none (only a
                                 // full refit applies)
  std::string_view name;         // names the chunk in errors
};

struct DeltaEncodeOptions {
  // Also try packing the smaller sparse body with each entropy stage (zstd); off, encoding reads
  // and writes less but sends more (bench/RESULTS.md, "Delta codec").
  bool entropy = true;
  // zstd's compression level: 1 is its fastest standard level (docs/delta.md measured the others).
  int zstd_level = 1;
  // The format every chunk is encoded in, whatever its size (tests, benchmarks); nullopt: the
  // smallest of dense, bitmask and runs, or the smaller sparse one packed by an entropy stage.
  std::optional<DeltaFormat> format;
};

// Nothing when `header` is a payload for a chunk of `chunk_bytes` bytes of `dtype`; kMismatch
// naming both otherwise (what decode() checks first, for decoders of chunks elsewhere).
[[nodiscard]] Result<void> check_delta_target(const DeltaHeader& header, std::int64_t chunk_bytes,
                                              DType dtype);

// Encodes and decodes chunks; holds the entropy stages' working state and scratch memory, so one
// codec serves one thread, and reusing it saves allocations.
class DeltaCodec {
 public:
  explicit DeltaCodec(DeltaEncodeOptions options = {});
  ~DeltaCodec();
  DeltaCodec(DeltaCodec&&) noexcept;
  DeltaCodec& operator=(DeltaCodec&&) noexcept;

  // Writes the payload that turns `source.baseline` into `source.current` at the front of `out`
  // and returns its header (its size: payload_bytes(); result: the next step's base).
  // `out` holds at least kDeltaHeaderBytes + current.size() bytes, or with options.format
  // delta_payload_capacity(). Costs one pass over both spans and, when a sparse format wins, a
  // second one (a full refit: one checksum pass over `current`).
  [[nodiscard]] Result<DeltaHeader> encode(const DeltaSource& source, std::span<std::byte> out);

  // Applies `payload` to `target.bytes` and returns their new checksum (the next step's base).
  // On any error the bytes are untouched and the chunk needs a full refit: kParse for a payload
  // that is not well-formed, kMismatch for one that does not fit this chunk or its baseline.
  [[nodiscard]] Result<Checksum> decode(std::span<const std::byte> payload, const DeltaTarget& target);

  const DeltaEncodeOptions& options() const { return options_; }

 private:
  DeltaEncodeOptions options_;
  std::unique_ptr<delta::CodecState> state_;  // the entropy stages' contexts, scratch buffers
};

}  // namespace refit
