#include "device_delta_codec.h"

#include <array>
#include <string>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/delta/baseline.h"
#include "refit/delta/codec.h"

namespace refit::nccl_detail {
namespace {

DeltaLanes lanes_of(std::int64_t bytes, std::int64_t element_bytes) {
  DeltaLanes d{.bytes = bytes,
               .elements = bytes / element_bytes,
               .element_bytes = static_cast<std::int32_t>(element_bytes)};
  d.lanes = delta_lanes_of(d.elements);
  d.tiles = delta_tiles_of(d.lanes);
  return d;
}

std::int64_t bitmask_body_bytes(std::int64_t elements, std::int64_t changed, std::int64_t element_bytes) {
  return delta_mask_bytes(elements) + changed * element_bytes;
}

Result<void> write_header(DeltaKernels& kernels, const DeltaHeader& header, std::byte* out) {
  std::array<std::byte, kDeltaHeaderBytes> bytes{};
  write_delta_header(header, bytes);
  return kernels.upload(out, bytes);
}

Result<void> check_source(const DeviceDeltaSource& source, std::int64_t element_bytes,
                          std::int64_t capacity) {
  if (source.bytes < 0 || source.bytes % element_bytes != 0)
    return invalid(
        fmt::format("a chunk of {} bytes is not whole {} elements", source.bytes, dtype_name(source.dtype)));
  if (capacity < kDeltaHeaderBytes + source.bytes)
    return out_of_range(fmt::format("{} bytes for the payload of a {}-byte chunk, which may need {}",
                                    capacity, source.bytes, kDeltaHeaderBytes + source.bytes));
  return {};
}

}  // namespace

Result<DeltaHeader> DeviceDeltaCodec::encode(const DeviceDeltaSource& source, std::byte* out,
                                             std::int64_t capacity) {
  auto encoded = encode_chunk(source, out, capacity);
  if (!encoded) return std::unexpected(std::move(encoded).error().in(std::string(source.name)));
  return encoded;
}

Result<Checksum> DeviceDeltaCodec::decode(const std::byte* payload, std::int64_t payload_bytes,
                                          const DeviceDeltaTarget& target) {
  auto decoded = decode_chunk(payload, payload_bytes, target);
  if (!decoded) return std::unexpected(std::move(decoded).error().in(std::string(target.name)));
  return decoded;
}

// As DeltaCodec::encode with its entropy stage off, bitmask and dense alone: a full refit without
// a base; otherwise one scan for the changes and the result's checksum, then the smaller body.
Result<DeltaHeader> DeviceDeltaCodec::encode_chunk(const DeviceDeltaSource& source, std::byte* out,
                                                   std::int64_t capacity) {
  const std::int64_t element_bytes = dtype_size(source.dtype);
  REFIT_TRY(check_source(source, element_bytes, capacity));
  DeltaLanes d = lanes_of(source.bytes, element_bytes);
  d.baseline = source.baseline;
  d.current = source.current;
  REFIT_TRY(kernels_.prepare(d));
  DeltaHeader header{
      .element_bytes = element_bytes, .chunk_bytes = source.bytes, .changed_elements = d.elements};
  std::int64_t body = source.bytes;
  if (!source.base) {
    header.result = Checksum{REFIT_TRY(kernels_.checksum(d)).sum};
  } else {
    const DeltaTotals scan = REFIT_TRY(kernels_.scan(d));
    header.changed_elements = static_cast<std::int64_t>(scan.count);
    header.base = *source.base;
    header.result = Checksum{source.base->value + scan.sum};
    const std::int64_t bitmask = bitmask_body_bytes(d.elements, header.changed_elements, element_bytes);
    if (bitmask < source.bytes) {
      header.format.encoding = DeltaEncoding::kBitmask;
      body = bitmask;
    }
  }
  std::byte* body_out = out + kDeltaHeaderBytes;
  if (header.format.encoding == DeltaEncoding::kBitmask) {
    d.body = body_out;
    d.changed = header.changed_elements;
    REFIT_TRY(kernels_.write(d));
  } else {
    REFIT_TRY(kernels_.copy(body_out, source.current, source.bytes));
  }
  header.inner_bytes = body;
  header.body_bytes = body;
  REFIT_TRY(write_header(kernels_, header, out));
  return header;
}

Result<Checksum> DeviceDeltaCodec::decode_chunk(const std::byte* payload, std::int64_t payload_bytes,
                                                const DeviceDeltaTarget& target) {
  std::array<std::byte, kDeltaHeaderBytes> bytes{};
  if (payload_bytes >= kDeltaHeaderBytes) REFIT_TRY(kernels_.download(bytes, payload));
  const DeltaHeader header = REFIT_TRY(read_delta_header(bytes, payload_bytes));
  REFIT_TRY(check_delta_target(header, target.size, target.dtype));
  if (header.format.entropy != DeltaEntropy::kNone || header.format.encoding == DeltaEncoding::kRuns)
    return unsupported(
        fmt::format("a {} payload: the GPU codec decodes dense and bitmask ones (DeltaCodec "
                    "decodes the others)",
                    delta_format_name(header.format)));
  const std::byte* body = payload + kDeltaHeaderBytes;
  return header.format.encoding == DeltaEncoding::kDense ? decode_dense(header, body, target)
                                                         : decode_bitmask(header, body, target);
}

Result<Checksum> DeviceDeltaCodec::decode_dense(const DeltaHeader& header, const std::byte* body,
                                                const DeviceDeltaTarget& target) {
  if (header.body_bytes != header.chunk_bytes)
    return parse_error(
        fmt::format("dense body of {} bytes for a chunk of {}", header.body_bytes, header.chunk_bytes));
  DeltaLanes d = lanes_of(header.chunk_bytes, header.element_bytes);
  d.current = body;
  REFIT_TRY(kernels_.prepare(d));
  const Checksum result{REFIT_TRY(kernels_.checksum(d)).sum};
  if (result != header.result)
    return mismatch(
        fmt::format("the dense body's checksum {:#018x} is not the sender's {:#018x} (a corrupt "
                    "payload): a full refit is needed",
                    result.value, header.result.value));
  REFIT_TRY(kernels_.copy(target.bytes, body, header.chunk_bytes));
  return result;
}

// Pass 1 checks the mask (exactly `changed` bits, none past the end) before pass 2 reads a plane
// by any rank; pass 2 computes the result's checksum writing nothing; pass 3 applies.
Result<Checksum> DeviceDeltaCodec::decode_bitmask(const DeltaHeader& header, const std::byte* body,
                                                  const DeviceDeltaTarget& target) {
  REFIT_TRY(delta::same_baseline(header.base, target.base));
  DeltaLanes d = lanes_of(header.chunk_bytes, header.element_bytes);
  const std::int64_t expected = bitmask_body_bytes(d.elements, header.changed_elements, header.element_bytes);
  if (header.body_bytes != expected)
    return parse_error(fmt::format("bitmask body of {} bytes; a mask of {} and {} values of {} take {}",
                                   header.body_bytes, delta_mask_bytes(d.elements), header.changed_elements,
                                   header.element_bytes, expected));
  d.target = target.bytes;
  d.mask_in = body;
  d.planes_in = body + delta_mask_bytes(d.elements);
  d.changed = header.changed_elements;
  REFIT_TRY(kernels_.prepare(d));
  const DeltaTotals bits = REFIT_TRY(kernels_.count(d));
  if (bits.count != static_cast<std::uint64_t>(header.changed_elements))
    return parse_error(fmt::format("bitmask body: {} bits set, the header says {} elements changed",
                                   bits.count, header.changed_elements));
  if (bits.sum != 0)
    return parse_error(fmt::format("bitmask body: bits set past the chunk's {} elements", d.elements));
  const Checksum result{target.base->value + REFIT_TRY(kernels_.check(d)).sum};
  if (result != header.result)
    return mismatch(
        fmt::format("the decoded chunk's checksum {:#018x} is not the sender's {:#018x} (a corrupt "
                    "payload, or a baseline that differs): a full refit is needed",
                    result.value, header.result.value));
  REFIT_TRY(kernels_.apply(d));
  return result;
}

}  // namespace refit::nccl_detail
