#pragma once
// The delta codec of a chunk that lies in device memory (docs/delta.md, "The GPU codec"): the same
// payloads as refit::DeltaCodec with its entropy stage off, from the same checksum, so that either
// side of a refit may run either codec. It encodes the smallest of dense, bitmask and runs
// (DeltaCodec's choice among them, the same bytes) and decodes any of them, all or nothing: the
// result's checksum is computed from the receiver's bytes and the changes, and compared with the
// sender's, before anything is written. zstd is not run on the GPU: a payload packed by it is
// refused (kUnsupported) and needs DeltaCodec.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "delta_kernels.h"
#include "refit/core/dtype.h"
#include "refit/core/error.h"
#include "refit/delta/payload.h"

namespace refit::nccl_detail {

// One chunk at the sender, in the kernels' memory.
struct DeviceDeltaSource {
  const std::byte* baseline = nullptr;  // the bytes last sent (ignored without `base`)
  const std::byte* current = nullptr;   // the bytes to send now
  std::int64_t bytes = 0;
  DType dtype = DType::kBF16;
  std::optional<Checksum> base;  // the baseline's checksum; nullopt: a full refit (dense)
  std::string_view name;         // names the chunk in errors
};

// One chunk at the receiver, in the kernels' memory.
struct DeviceDeltaTarget {
  std::byte* bytes = nullptr;  // the receiver's baseline, which decode() turns into the sender's current
  std::int64_t size = 0;
  DType dtype = DType::kBF16;
  std::optional<Checksum> base;  // the checksum of `bytes` the receiver keeps; nullopt: none
  std::string_view name;
};

class DeviceDeltaCodec {
 public:
  // `kernels` runs the passes (the GPU's, or their bodies on the host) and outlives the codec.
  explicit DeviceDeltaCodec(DeltaKernels& kernels) : kernels_(kernels) {}

  // Writes the payload at `out` (kernels' memory, at least kDeltaHeaderBytes + source.bytes) and
  // returns its header. Reads the two chunks once whole (the scan), then the changed elements.
  [[nodiscard]] Result<DeltaHeader> encode(const DeviceDeltaSource& source, std::byte* out,
                                           std::int64_t capacity);

  // Applies the payload of `payload_bytes` at `payload` (kernels' memory) to `target` and returns
  // its new checksum; on any error the target's bytes are untouched: kParse for a payload that is
  // not well-formed, kMismatch for one meant for another chunk or baseline, kUnsupported for a
  // zstd payload.
  [[nodiscard]] Result<Checksum> decode(const std::byte* payload, std::int64_t payload_bytes,
                                        const DeviceDeltaTarget& target);

  // checksum_of the `size` bytes at `bytes` (kernels' memory), in one pass.
  [[nodiscard]] Result<Checksum> checksum(const std::byte* bytes, std::int64_t size);

 private:
  struct Coder;
  static std::span<const Coder> coders();  // in DeltaEncoding order
  static const Coder& coder(DeltaEncoding encoding);

  [[nodiscard]] Result<DeltaHeader> encode_chunk(const DeviceDeltaSource& source, std::byte* out,
                                                 std::int64_t capacity);
  [[nodiscard]] Result<Checksum> decode_chunk(const std::byte* payload, std::int64_t payload_bytes,
                                              const DeviceDeltaTarget& target);
  [[nodiscard]] Result<Checksum> decode_dense(const DeltaHeader& header, const std::byte* body,
                                              const DeviceDeltaTarget& target);
  [[nodiscard]] Result<Checksum> decode_bitmask(const DeltaHeader& header, const std::byte* body,
                                                const DeviceDeltaTarget& target);
  [[nodiscard]] Result<Checksum> decode_runs(const DeltaHeader& header, const std::byte* body,
                                             const DeviceDeltaTarget& target);
  [[nodiscard]] Result<Checksum> apply_mask(const DeltaHeader& header, DeltaLanes& d,
                                            const DeviceDeltaTarget& target);

  DeltaKernels& kernels_;
};

}  // namespace refit::nccl_detail
