// The dense encoding: the chunk's bytes as they are, what a full refit sends.
#include <algorithm>

#include <fmt/format.h>

#include "position_coder.h"

namespace refit::delta {
namespace {

std::int64_t body_bytes(const ChangeStats& stats) { return stats.elements * stats.element_bytes; }

// std::ranges::copy rather than memcpy: an empty chunk's spans may hold null pointers.
void write(std::span<const std::byte>, std::span<const std::byte> current, const ChangeStats&,
           std::span<std::byte> out) {
  std::ranges::copy(current, out.begin());
}

Result<Checksum> check(std::span<const std::byte> body, const DeltaHeader& header, std::span<const std::byte>,
                       Checksum) {
  if (static_cast<std::int64_t>(body.size()) != header.chunk_bytes)
    return parse_error(
        fmt::format("dense body of {} bytes for a chunk of {}", body.size(), header.chunk_bytes));
  return checksum_of(body);
}

void apply(std::span<const std::byte> body, const DeltaHeader&, std::span<std::byte> bytes) {
  std::ranges::copy(body, bytes.begin());
}

}  // namespace

const PositionCoder& dense_coder() {
  static constexpr PositionCoder coder{.id = DeltaEncoding::kDense,
                                       .needs_baseline = false,
                                       .body_bytes = body_bytes,
                                       .write = write,
                                       .check = check,
                                       .apply = apply};
  return coder;
}

}  // namespace refit::delta
