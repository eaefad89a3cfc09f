#pragma once
// The entropy stages that may pack an encoding's body, as a table whose entries carry their own
// behaviour (DeltaEntropy::kNone is the absence of a stage, not an entry). Their working state
// lives in an EntropyContext, one per DeltaCodec.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "refit/core/error.h"
#include "refit/delta/payload.h"

struct ZSTD_CCtx_s;
struct ZSTD_DCtx_s;

namespace refit::delta {

class EntropyContext {
 public:
  explicit EntropyContext(int zstd_level);
  ~EntropyContext();
  EntropyContext(const EntropyContext&) = delete;
  EntropyContext& operator=(const EntropyContext&) = delete;

  ZSTD_CCtx_s* zstd_compressor() { return compressor_; }
  ZSTD_DCtx_s* zstd_decompressor() { return decompressor_; }

 private:
  ZSTD_CCtx_s* compressor_;
  ZSTD_DCtx_s* decompressor_;
};

struct EntropyStage {
  DeltaEntropy id;
  // The most bytes pack() may need for `inner_bytes` (it may fail with less room even when its
  // result would have fit).
  std::int64_t (*bound)(std::int64_t inner_bytes);
  // Packs `inner` into `out`: the bytes written, or nullopt when they would not fit.
  Result<std::optional<std::int64_t>> (*pack)(EntropyContext& context, std::span<const std::byte> inner,
                                              std::span<std::byte> out);
  // Unpacks `body` into `inner`, which it must fill exactly.
  Result<void> (*unpack)(EntropyContext& context, std::span<const std::byte> body,
                         std::span<std::byte> inner);
};

// Every stage there is (not kNone).
std::span<const EntropyStage* const> entropy_stages();
// The stage of `entropy`; nullptr for kNone.
const EntropyStage* entropy_stage(DeltaEntropy entropy);

}  // namespace refit::delta
