#include "refit/delta/codec.h"

#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "change_scan.h"
#include "entropy_stage.h"
#include "position_coder.h"
#include "refit/core/try.h"
#include "refit/delta/baseline.h"

namespace refit {

namespace delta {

struct CodecState {
  explicit CodecState(int zstd_level) : entropy(zstd_level) {}
  EntropyContext entropy;
  std::vector<std::byte> inner;   // an encoding's body before its entropy stage
  std::vector<std::byte> packed;  // a body an entropy stage packed, until it proves the smallest
};

}  // namespace delta

namespace {

using delta::ChangeStats;
using delta::CodecState;
using delta::EntropyStage;
using delta::PositionCoder;

// What encode() wrote after the header.
struct Body {
  DeltaFormat format;
  std::int64_t inner_bytes = 0;
  std::int64_t bytes = 0;
};

// The chunk as encode() sees it.
struct Chunk {
  std::span<const std::byte> baseline;
  std::span<const std::byte> current;
  ChangeStats stats;
};

Result<void> check_source(const DeltaSource& source, std::int64_t element_bytes) {
  if (source.current.size() % static_cast<std::size_t>(element_bytes) != 0)
    return invalid(fmt::format("a chunk of {} bytes is not whole {} elements", source.current.size(),
                               dtype_name(source.dtype)));
  if (source.base && source.baseline.size() != source.current.size())
    return mismatch(fmt::format("a baseline of {} bytes for a chunk of {}", source.baseline.size(),
                                source.current.size()));
  return {};
}

Result<void> check_capacity(std::int64_t needed, std::span<std::byte> out, DeltaFormat format) {
  if (needed > static_cast<std::int64_t>(out.size()))
    return out_of_range(fmt::format("a {} body of {} bytes does not fit the {} bytes after the header",
                                    delta_format_name(format), needed, out.size()));
  return {};
}

// The smallest encoding by its exact size, the first in table order on a tie.
const PositionCoder& smallest(const ChangeStats& stats, bool sparse_only) {
  const PositionCoder* best = nullptr;
  for (const PositionCoder* coder : delta::position_coders()) {
    if (sparse_only && !coder->needs_baseline) continue;
    if (!best || coder->body_bytes(stats) < best->body_bytes(stats)) best = coder;
  }
  return *best;
}

Body write_raw(const PositionCoder& coder, const Chunk& chunk, std::span<std::byte> out) {
  const std::int64_t size = coder.body_bytes(chunk.stats);
  coder.write(chunk.baseline, chunk.current, chunk.stats, out.first(static_cast<std::size_t>(size)));
  return {.format = {.encoding = coder.id}, .inner_bytes = size, .bytes = size};
}

// `coder`'s body, written into state.inner for an entropy stage to pack.
void write_inner(CodecState& state, const PositionCoder& coder, const Chunk& chunk) {
  state.inner.resize(static_cast<std::size_t>(coder.body_bytes(chunk.stats)));
  coder.write(chunk.baseline, chunk.current, chunk.stats, state.inner);
}

// state.inner (written by `coder`) packed by `stage` into `out`; nullopt when it does not fit.
Result<std::optional<Body>> pack_inner(CodecState& state, const PositionCoder& coder,
                                       const EntropyStage& stage, std::span<std::byte> out) {
  const auto packed = REFIT_TRY(stage.pack(state.entropy, state.inner, out));
  if (!packed) return std::nullopt;
  return Body{.format = {.encoding = coder.id, .entropy = stage.id},
              .inner_bytes = static_cast<std::int64_t>(state.inner.size()),
              .bytes = *packed};
}

Result<Body> write_format(CodecState& state, DeltaFormat format, const Chunk& chunk,
                          std::span<std::byte> out) {
  const PositionCoder& coder = delta::position_coder(format.encoding);
  const EntropyStage* stage = delta::entropy_stage(format.entropy);
  if (!stage) {
    REFIT_TRY(check_capacity(coder.body_bytes(chunk.stats), out, format));
    return write_raw(coder, chunk, out);
  }
  write_inner(state, coder, chunk);
  const auto body = REFIT_TRY(pack_inner(state, coder, *stage, out));
  if (!body)
    return out_of_range(fmt::format("a {} body does not fit the {} bytes after the header",
                                    delta_format_name(format), out.size()));
  return *body;
}

// The smallest body: the smallest raw encoding, unless an entropy stage packs the smaller sparse
// one into less (packing only that one, not every encoding: docs/delta.md measured what it costs).
Result<Body> write_smallest(CodecState& state, bool entropy, const Chunk& chunk, std::span<std::byte> out) {
  const PositionCoder& raw = smallest(chunk.stats, false);
  if (!entropy || chunk.stats.changed == 0) return write_raw(raw, chunk, out);
  const PositionCoder& sparse = smallest(chunk.stats, true);
  write_inner(state, sparse, chunk);
  std::optional<Body> best;
  for (const EntropyStage* stage : delta::entropy_stages()) {
    // Room for the worst case: zstd may give up in less room even where its result would fit.
    state.packed.resize(
        static_cast<std::size_t>(stage->bound(static_cast<std::int64_t>(state.inner.size()))));
    const auto body = REFIT_TRY(pack_inner(state, sparse, *stage, state.packed));
    if (!body || body->bytes >= (best ? best->bytes : raw.body_bytes(chunk.stats))) continue;
    best = body;
    std::memcpy(out.data(), state.packed.data(), static_cast<std::size_t>(body->bytes));
  }
  if (best) return *best;
  if (&raw != &sparse) return write_raw(raw, chunk, out);
  std::memcpy(out.data(), state.inner.data(), state.inner.size());
  return Body{.format = {.encoding = raw.id},
              .inner_bytes = static_cast<std::int64_t>(state.inner.size()),
              .bytes = static_cast<std::int64_t>(state.inner.size())};
}

Result<DeltaHeader> encode_chunk(CodecState& state, const DeltaEncodeOptions& options,
                                 const DeltaSource& source, std::span<std::byte> out) {
  const std::int64_t element_bytes = dtype_size(source.dtype);
  REFIT_TRY(check_source(source, element_bytes));
  const auto chunk_bytes = static_cast<std::int64_t>(source.current.size());
  if (static_cast<std::int64_t>(out.size()) < kDeltaHeaderBytes)
    return out_of_range(fmt::format("{} bytes for a payload, less than its header", out.size()));
  const auto body_out = out.subspan(static_cast<std::size_t>(kDeltaHeaderBytes));
  DeltaHeader header{.element_bytes = element_bytes, .chunk_bytes = chunk_bytes};
  Chunk chunk{.baseline = source.baseline,
              .current = source.current,
              .stats = {.elements = chunk_bytes / element_bytes, .element_bytes = element_bytes}};
  Body body;
  if (!source.base) {
    // A full refit: nothing to compare with, so every element counts as changed.
    REFIT_TRY(check_capacity(chunk_bytes, body_out, {}));
    header.changed_elements = chunk.stats.elements;
    header.result = checksum_of(source.current);
    body = write_raw(delta::dense_coder(), chunk, body_out);
  } else {
    const auto scan = delta::scan_changes(source.baseline, source.current, element_bytes, *source.base);
    chunk.stats = scan.stats;
    header.changed_elements = scan.stats.changed;
    header.base = *source.base;
    header.result = scan.result;
    if (options.format) {
      body = REFIT_TRY(write_format(state, *options.format, chunk, body_out));
    } else {
      REFIT_TRY(check_capacity(chunk_bytes, body_out, {}));
      body = REFIT_TRY(write_smallest(state, options.entropy, chunk, body_out));
    }
  }
  header.format = body.format;
  header.inner_bytes = body.inner_bytes;
  header.body_bytes = body.bytes;
  write_delta_header(header, out);
  return header;
}

// Checks the whole payload against the chunk and computes the result's checksum, writing nothing;
// only then applies it.
Result<Checksum> decode_chunk(CodecState& state, std::span<const std::byte> payload,
                              const DeltaTarget& target) {
  const DeltaHeader header = REFIT_TRY(read_delta_header(payload));
  REFIT_TRY(check_delta_target(header, static_cast<std::int64_t>(target.bytes.size()), target.dtype));
  const PositionCoder& coder = delta::position_coder(header.format.encoding);
  if (coder.needs_baseline) REFIT_TRY(delta::same_baseline(header.base, target.base));
  std::span<const std::byte> inner = payload.subspan(static_cast<std::size_t>(kDeltaHeaderBytes));
  if (const EntropyStage* stage = delta::entropy_stage(header.format.entropy)) {
    state.inner.resize(static_cast<std::size_t>(header.inner_bytes));
    REFIT_TRY(stage->unpack(state.entropy, inner, state.inner));
    inner = state.inner;
  }
  const Checksum result =
      REFIT_TRY(coder.check(inner, header, target.bytes, target.base.value_or(Checksum{})));
  if (result != header.result)
    return mismatch(
        fmt::format("the decoded chunk's checksum {:#018x} is not the sender's {:#018x} (a corrupt "
                    "payload, or a baseline that differs): a full refit is needed",
                    result.value, header.result.value));
  coder.apply(inner, header, target.bytes);
  return result;
}

}  // namespace

Result<void> check_delta_target(const DeltaHeader& header, std::int64_t chunk_bytes, DType dtype) {
  const std::int64_t element_bytes = dtype_size(dtype);
  if (header.element_bytes != element_bytes)
    return mismatch(fmt::format("a payload in {}-byte elements for a chunk of {} ({} bytes each)",
                                header.element_bytes, dtype_name(dtype), element_bytes));
  if (header.chunk_bytes != chunk_bytes)
    return mismatch(fmt::format("a payload for a chunk of {} bytes applied to one of {}", header.chunk_bytes,
                                chunk_bytes));
  return {};
}

DeltaCodec::DeltaCodec(DeltaEncodeOptions options)
    : options_(options), state_(std::make_unique<CodecState>(options.zstd_level)) {}
DeltaCodec::~DeltaCodec() = default;
DeltaCodec::DeltaCodec(DeltaCodec&&) noexcept = default;
DeltaCodec& DeltaCodec::operator=(DeltaCodec&&) noexcept = default;

Result<DeltaHeader> DeltaCodec::encode(const DeltaSource& source, std::span<std::byte> out) {
  auto encoded = encode_chunk(*state_, options_, source, out);
  if (!encoded) return std::unexpected(std::move(encoded).error().in(std::string(source.name)));
  return encoded;
}

Result<Checksum> DeltaCodec::decode(std::span<const std::byte> payload, const DeltaTarget& target) {
  auto decoded = decode_chunk(*state_, payload, target);
  if (!decoded) return std::unexpected(std::move(decoded).error().in(std::string(target.name)));
  return decoded;
}

}  // namespace refit
