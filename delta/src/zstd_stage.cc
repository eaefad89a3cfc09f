// The zstd entropy stage: one zstd frame of the body (Debian's libzstd; docs/delta.md says why
// zstd and which level).
#include <array>

#include <fmt/format.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "entropy_stage.h"

namespace refit::delta {
namespace {

std::int64_t bound(std::int64_t inner_bytes) {
  return static_cast<std::int64_t>(ZSTD_compressBound(static_cast<std::size_t>(inner_bytes)));
}

Result<std::optional<std::int64_t>> pack(EntropyContext& context, std::span<const std::byte> inner,
                                         std::span<std::byte> out) {
  const std::size_t n =
      ZSTD_compress2(context.zstd_compressor(), out.data(), out.size(), inner.data(), inner.size());
  if (ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall) return std::nullopt;
  if (ZSTD_isError(n))
    return fail(ErrorCode::kInternal, fmt::format("zstd compression: {}", ZSTD_getErrorName(n)));
  return static_cast<std::int64_t>(n);
}

Result<void> unpack(EntropyContext& context, std::span<const std::byte> body, std::span<std::byte> inner) {
  const std::size_t n =
      ZSTD_decompressDCtx(context.zstd_decompressor(), inner.data(), inner.size(), body.data(), body.size());
  if (ZSTD_isError(n)) return parse_error(fmt::format("zstd body: {}", ZSTD_getErrorName(n)));
  if (n != inner.size())
    return parse_error(fmt::format("zstd body: unpacks to {} bytes, the header says {}", n, inner.size()));
  return {};
}

constexpr EntropyStage kZstd{.id = DeltaEntropy::kZstd, .bound = bound, .pack = pack, .unpack = unpack};

}  // namespace

EntropyContext::EntropyContext(int zstd_level)
    : compressor_(ZSTD_createCCtx()), decompressor_(ZSTD_createDCtx()) {
  ZSTD_CCtx_setParameter(compressor_, ZSTD_c_compressionLevel, zstd_level);
}

EntropyContext::~EntropyContext() {
  ZSTD_freeCCtx(compressor_);
  ZSTD_freeDCtx(decompressor_);
}

std::span<const EntropyStage* const> entropy_stages() {
  static const std::array<const EntropyStage*, 1> table = {&kZstd};
  return table;
}

const EntropyStage* entropy_stage(DeltaEntropy entropy) {
  for (const EntropyStage* stage : entropy_stages())
    if (stage->id == entropy) return stage;
  return nullptr;
}

}  // namespace refit::delta
