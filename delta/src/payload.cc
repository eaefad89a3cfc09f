#include "refit/delta/payload.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <zstd.h>

#include "refit/core/try.h"
#include "words.h"

namespace refit {
namespace {

// The header's layout (docs/delta.md): 8 bytes of ids, then six 64-bit fields, little-endian.
constexpr std::array<std::uint8_t, 4> kMagic = {'R', 'F', 'D', 1};  // "RFD", format version 1
constexpr std::size_t kEncodingAt = 4, kEntropyAt = 5, kElementAt = 6, kReservedAt = 7;
constexpr std::size_t kChunkAt = 8, kChangedAt = 16, kInnerAt = 24, kBodyAt = 32, kBaseAt = 40,
                      kResultAt = 48;

constexpr std::array<std::string_view, 3> kEncodingNames = {"dense", "bitmask", "runs"};
constexpr std::array<std::string_view, 2> kEntropyNames = {"none", "zstd"};
constexpr std::array<DeltaEncoding, 3> kEncodings = {DeltaEncoding::kDense, DeltaEncoding::kBitmask,
                                                     DeltaEncoding::kRuns};
constexpr std::array<DeltaEntropy, 2> kEntropies = {DeltaEntropy::kNone, DeltaEntropy::kZstd};

void put_u64(std::span<std::byte> out, std::size_t at, std::uint64_t v) {
  std::memcpy(out.data() + at, &v, 8);
}
std::uint64_t get_u64(std::span<const std::byte> in, std::size_t at) {
  std::uint64_t v;
  std::memcpy(&v, in.data() + at, 8);
  return v;
}
std::uint8_t get_u8(std::span<const std::byte> in, std::size_t at) {
  return static_cast<std::uint8_t>(in[at]);
}

bool valid_element_bytes(std::uint64_t b) { return b == 1 || b == 2 || b == 4 || b == 8; }

// The body sizes any encoding can reach before its entropy stage: the chunk plus one byte per
// element (runs: at most one byte of positions per element; bitmask: one bit).
std::int64_t max_inner_bytes(std::int64_t chunk_bytes, std::int64_t element_bytes) {
  return chunk_bytes + chunk_bytes / element_bytes;
}

// The 64-bit size at `at`, refused when it cannot be a size.
Result<std::int64_t> get_size(std::span<const std::byte> in, std::size_t at, std::string_view field) {
  const std::uint64_t v = get_u64(in, at);
  if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return parse_error(fmt::format("delta payload: {} {} is not a size", field, v));
  return static_cast<std::int64_t>(v);
}

Result<void> check_ids(std::span<const std::byte> payload) {
  if (std::memcmp(payload.data(), kMagic.data(), kMagic.size()) != 0)
    return parse_error("delta payload: no 'RFD' version 1 magic at its start");
  if (get_u8(payload, kEncodingAt) >= kEncodings.size())
    return parse_error(fmt::format("delta payload: unknown encoding {}", get_u8(payload, kEncodingAt)));
  if (get_u8(payload, kEntropyAt) >= kEntropies.size())
    return parse_error(fmt::format("delta payload: unknown entropy stage {}", get_u8(payload, kEntropyAt)));
  if (!valid_element_bytes(get_u8(payload, kElementAt)))
    return parse_error(
        fmt::format("delta payload: element size {} is not 1, 2, 4 or 8 bytes", get_u8(payload, kElementAt)));
  if (get_u8(payload, kReservedAt) != 0) return parse_error("delta payload: reserved byte 7 is not zero");
  return {};
}

Result<void> check_sizes(const DeltaHeader& h, std::int64_t payload_bytes) {
  if (h.body_bytes != payload_bytes - kDeltaHeaderBytes)
    return parse_error(fmt::format("delta payload: {} bytes after the header, the header says {}",
                                   payload_bytes - kDeltaHeaderBytes, h.body_bytes));
  if (h.chunk_bytes % h.element_bytes != 0)
    return parse_error(fmt::format("delta payload: a chunk of {} bytes is not whole {}-byte elements",
                                   h.chunk_bytes, h.element_bytes));
  if (h.changed_elements > h.chunk_bytes / h.element_bytes)
    return parse_error(fmt::format("delta payload: {} changed elements in a chunk of {}", h.changed_elements,
                                   h.chunk_bytes / h.element_bytes));
  // inner <= chunk + chunk / element, written so that a huge chunk size cannot overflow.
  if (h.inner_bytes > h.chunk_bytes && h.inner_bytes - h.chunk_bytes > h.chunk_bytes / h.element_bytes)
    return parse_error(
        fmt::format("delta payload: an inner body of {} bytes, more than any encoding makes "
                    "of a {}-byte chunk",
                    h.inner_bytes, h.chunk_bytes));
  if (h.format.entropy == DeltaEntropy::kNone && h.inner_bytes != h.body_bytes)
    return parse_error(
        fmt::format("delta payload: no entropy stage, but an inner body of {} bytes in a body of {}",
                    h.inner_bytes, h.body_bytes));
  return {};
}

}  // namespace

std::string_view delta_encoding_name(DeltaEncoding encoding) {
  return kEncodingNames[static_cast<std::size_t>(encoding)];
}
std::string_view delta_entropy_name(DeltaEntropy entropy) {
  return kEntropyNames[static_cast<std::size_t>(entropy)];
}
std::string delta_format_name(DeltaFormat format) {
  if (format.entropy == DeltaEntropy::kNone) return std::string(delta_encoding_name(format.encoding));
  return fmt::format("{}+{}", delta_encoding_name(format.encoding), delta_entropy_name(format.entropy));
}
std::span<const DeltaEncoding> all_delta_encodings() { return kEncodings; }
std::span<const DeltaEntropy> all_delta_entropies() { return kEntropies; }

std::int64_t DeltaHeader::payload_bytes() const { return kDeltaHeaderBytes + body_bytes; }

std::int64_t delta_payload_capacity(std::int64_t chunk_bytes, std::int64_t element_bytes) {
  const auto inner = static_cast<std::size_t>(max_inner_bytes(chunk_bytes, element_bytes));
  return kDeltaHeaderBytes + static_cast<std::int64_t>(ZSTD_compressBound(inner));
}

void write_delta_header(const DeltaHeader& h, std::span<std::byte> out) {
  std::memcpy(out.data(), kMagic.data(), kMagic.size());
  out[kEncodingAt] = static_cast<std::byte>(h.format.encoding);
  out[kEntropyAt] = static_cast<std::byte>(h.format.entropy);
  out[kElementAt] = static_cast<std::byte>(h.element_bytes);
  out[kReservedAt] = std::byte{0};
  put_u64(out, kChunkAt, static_cast<std::uint64_t>(h.chunk_bytes));
  put_u64(out, kChangedAt, static_cast<std::uint64_t>(h.changed_elements));
  put_u64(out, kInnerAt, static_cast<std::uint64_t>(h.inner_bytes));
  put_u64(out, kBodyAt, static_cast<std::uint64_t>(h.body_bytes));
  put_u64(out, kBaseAt, h.base.value);
  put_u64(out, kResultAt, h.result.value);
}

Result<DeltaHeader> read_delta_header(std::span<const std::byte> payload) {
  return read_delta_header(
      payload.first(std::min(payload.size(), static_cast<std::size_t>(kDeltaHeaderBytes))),
      static_cast<std::int64_t>(payload.size()));
}

Result<DeltaHeader> read_delta_header(std::span<const std::byte> payload, std::int64_t size) {
  if (size < kDeltaHeaderBytes || static_cast<std::int64_t>(payload.size()) < kDeltaHeaderBytes)
    return parse_error(
        fmt::format("delta payload: {} bytes, shorter than its {}-byte header", size, kDeltaHeaderBytes));
  REFIT_TRY(check_ids(payload));
  DeltaHeader h{
      .format = {.encoding = static_cast<DeltaEncoding>(get_u8(payload, kEncodingAt)),
                 .entropy = static_cast<DeltaEntropy>(get_u8(payload, kEntropyAt))},
      .element_bytes = get_u8(payload, kElementAt),
      .chunk_bytes = REFIT_TRY(get_size(payload, kChunkAt, "chunk size")),
      .changed_elements = REFIT_TRY(get_size(payload, kChangedAt, "changed elements")),
      .inner_bytes = REFIT_TRY(get_size(payload, kInnerAt, "inner body size")),
      .body_bytes = REFIT_TRY(get_size(payload, kBodyAt, "body size")),
      .base = Checksum{get_u64(payload, kBaseAt)},
      .result = Checksum{get_u64(payload, kResultAt)},
  };
  REFIT_TRY(check_sizes(h, size));
  return h;
}

}  // namespace refit
