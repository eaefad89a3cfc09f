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

// The encodings as this codec runs them, in DeltaEncoding order (a table whose entries carry their
// own behaviour, as delta's PositionCoder): each sizes its body from the scan's lanes, writes it
// and decodes it, so that the codec never switches on the encoding.
struct DeviceDeltaCodec::Coder {
  DeltaEncoding id;
  // False for dense: its body is the chunk itself, whatever the receiver holds.
  bool needs_baseline = true;
  // The body's size once the scan (and for runs, the positions pass) filled `d`.
  std::int64_t (*body_bytes)(const DeltaLanes& d);
  Result<void> (*write)(DeltaKernels& kernels, const DeltaLanes& d);
  Result<Checksum> (DeviceDeltaCodec::*decode)(const DeltaHeader& header, const std::byte* body,
                                               const DeviceDeltaTarget& target);
};

std::span<const DeviceDeltaCodec::Coder> DeviceDeltaCodec::coders() {
  static constexpr std::array<Coder, 3> kCoders{{
      {.id = DeltaEncoding::kDense,
       .needs_baseline = false,
       .body_bytes = [](const DeltaLanes& d) { return d.bytes; },
       .write = [](DeltaKernels& k, const DeltaLanes& d) { return k.copy(d.body, d.current, d.bytes); },
       .decode = &DeviceDeltaCodec::decode_dense},
      {.id = DeltaEncoding::kBitmask,
       .body_bytes =
           [](const DeltaLanes& d) { return bitmask_body_bytes(d.elements, d.changed, d.element_bytes); },
       .write = [](DeltaKernels& k, const DeltaLanes& d) { return k.write(d); },
       .decode = &DeviceDeltaCodec::decode_bitmask},
      {.id = DeltaEncoding::kRuns,
       .body_bytes = [](const DeltaLanes& d) { return d.positions + d.changed * d.element_bytes; },
       .write = [](DeltaKernels& k, const DeltaLanes& d) { return k.write_runs(d); },
       .decode = &DeviceDeltaCodec::decode_runs},
  }};
  return kCoders;
}

const DeviceDeltaCodec::Coder& DeviceDeltaCodec::coder(DeltaEncoding encoding) {
  return coders()[static_cast<std::size_t>(encoding)];
}

// As DeltaCodec::encode with its entropy stage off: a full refit without a base; otherwise one scan
// for the changes and the result's checksum, the runs' position bytes from the mask, then the
// smallest body (the first in DeltaEncoding order on a tie, as DeltaCodec ranks them).
Result<DeltaHeader> DeviceDeltaCodec::encode_chunk(const DeviceDeltaSource& source, std::byte* out,
                                                   std::int64_t capacity) {
  const std::int64_t element_bytes = dtype_size(source.dtype);
  REFIT_TRY(check_source(source, element_bytes, capacity));
  DeltaLanes d = lanes_of(source.bytes, element_bytes);
  d.baseline = source.baseline;
  d.current = source.current;
  d.body = out + kDeltaHeaderBytes;
  REFIT_TRY(kernels_.prepare(d));
  DeltaHeader header{
      .element_bytes = element_bytes, .chunk_bytes = source.bytes, .changed_elements = d.elements};
  const Coder* chosen = &coder(DeltaEncoding::kDense);
  if (!source.base) {
    header.result = Checksum{REFIT_TRY(kernels_.checksum(d)).sum};
  } else {
    const DeltaTotals scan = REFIT_TRY(kernels_.scan(d));
    header.changed_elements = static_cast<std::int64_t>(scan.count);
    header.base = *source.base;
    header.result = Checksum{source.base->value + scan.sum};
    d.changed = header.changed_elements;
    d.positions = static_cast<std::int64_t>(REFIT_TRY(kernels_.positions(d)).count);
    for (const Coder& each : coders())
      if (each.body_bytes(d) < chosen->body_bytes(d)) chosen = &each;
  }
  REFIT_TRY(chosen->write(kernels_, d));
  header.format.encoding = chosen->id;
  header.inner_bytes = header.body_bytes = chosen->body_bytes(d);
  REFIT_TRY(write_header(kernels_, header, out));
  return header;
}

Result<Checksum> DeviceDeltaCodec::decode_chunk(const std::byte* payload, std::int64_t payload_bytes,
                                                const DeviceDeltaTarget& target) {
  std::array<std::byte, kDeltaHeaderBytes> bytes{};
  if (payload_bytes >= kDeltaHeaderBytes) REFIT_TRY(kernels_.download(bytes, payload));
  const DeltaHeader header = REFIT_TRY(read_delta_header(bytes, payload_bytes));
  REFIT_TRY(check_delta_target(header, target.size, target.dtype));
  if (header.format.entropy != DeltaEntropy::kNone)
    return unsupported(fmt::format("a {} payload: the GPU codec decodes raw ones (DeltaCodec decodes zstd)",
                                   delta_format_name(header.format)));
  const Coder& body_coder = coder(header.format.encoding);
  if (body_coder.needs_baseline) REFIT_TRY(delta::same_baseline(header.base, target.base));
  return (this->*body_coder.decode)(header, payload + kDeltaHeaderBytes, target);
}

Result<Checksum> DeviceDeltaCodec::decode_dense(const DeltaHeader& header, const std::byte* body,
                                                const DeviceDeltaTarget& target) {
  if (header.body_bytes != header.chunk_bytes)
    return parse_error(
        fmt::format("dense body of {} bytes for a chunk of {}", header.body_bytes, header.chunk_bytes));
  const Checksum result = REFIT_TRY(checksum(body, header.chunk_bytes));
  if (result != header.result)
    return mismatch(
        fmt::format("the dense body's checksum {:#018x} is not the sender's {:#018x} (a corrupt "
                    "payload): a full refit is needed",
                    result.value, header.result.value));
  REFIT_TRY(kernels_.copy(target.bytes, body, header.chunk_bytes));
  return result;
}

// The sum is over 8-byte words whatever the elements: byte elements take a chunk of any size.
Result<Checksum> DeviceDeltaCodec::checksum(const std::byte* bytes, std::int64_t size) {
  DeltaLanes d = lanes_of(size, 1);
  d.current = bytes;
  REFIT_TRY(kernels_.prepare(d));
  return Checksum{REFIT_TRY(kernels_.checksum(d)).sum};
}

Result<Checksum> DeviceDeltaCodec::decode_bitmask(const DeltaHeader& header, const std::byte* body,
                                                  const DeviceDeltaTarget& target) {
  DeltaLanes d = lanes_of(header.chunk_bytes, header.element_bytes);
  const std::int64_t expected = bitmask_body_bytes(d.elements, header.changed_elements, header.element_bytes);
  if (header.body_bytes != expected)
    return parse_error(fmt::format("bitmask body of {} bytes; a mask of {} and {} values of {} take {}",
                                   header.body_bytes, delta_mask_bytes(d.elements), header.changed_elements,
                                   header.element_bytes, expected));
  d.mask_in = body;
  d.planes_in = body + delta_mask_bytes(d.elements);
  REFIT_TRY(kernels_.prepare(d));
  return apply_mask(header, d, target);
}

// The runs become a mask in the workspace (checked whole: every varint complete and within 64
// bits, every head with its length, the runs' values the header's changed elements, none past the
// chunk's end), which then applies as a bitmask body's does.
Result<Checksum> DeviceDeltaCodec::decode_runs(const DeltaHeader& header, const std::byte* body,
                                               const DeviceDeltaTarget& target) {
  DeltaLanes d = lanes_of(header.chunk_bytes, header.element_bytes);
  const std::int64_t values = header.changed_elements * header.element_bytes;
  if (header.body_bytes < values)
    return parse_error(fmt::format("runs body of {} bytes, shorter than its {} values of {} bytes",
                                   header.body_bytes, header.changed_elements, header.element_bytes));
  d.positions = header.body_bytes - values;
  d.positions_in = body;
  REFIT_TRY(kernels_.prepare(d));
  const DeltaTotals runs = REFIT_TRY(kernels_.runs_to_mask(d));
  if (runs.flags != 0)
    return parse_error(
        "runs body: a position is cut short or overflows 64 bits, or a run's length is missing");
  if (runs.count != static_cast<std::uint64_t>(header.changed_elements))
    return parse_error(fmt::format("runs body: the runs hold {} elements, the header says {} changed",
                                   runs.count, header.changed_elements));
  if (runs.sum > static_cast<std::uint64_t>(d.elements))
    return parse_error(fmt::format("runs body: a run past the chunk's {} elements", d.elements));
  d.mask_in = reinterpret_cast<const std::byte*>(d.mask);
  d.planes_in = body + d.positions;
  return apply_mask(header, d, target);
}

// Pass 1 checks the mask (exactly `changed` bits, none past the end) before pass 2 reads a plane
// by any rank; pass 2 computes the result's checksum writing nothing; pass 3 applies.
Result<Checksum> DeviceDeltaCodec::apply_mask(const DeltaHeader& header, DeltaLanes& d,
                                              const DeviceDeltaTarget& target) {
  d.target = target.bytes;
  d.changed = header.changed_elements;
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
