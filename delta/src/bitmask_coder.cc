// The bitmask encoding: bit i of the mask (byte i / 8, bit i % 8) is set when element i changed,
// then the changed elements' XOR values as byte planes (xor_planes.h). It costs an eighth of a byte
// per element whatever changed, so it wins once about an eighth of the elements change
// (docs/delta.md).
#include <bit>

#include <fmt/format.h>

#include "change_visitors.h"
#include "element_types.h"
#include "position_coder.h"
#include "refit/core/try.h"
#include "xor_planes.h"

namespace refit::delta {
namespace {

std::int64_t mask_bytes(std::int64_t elements) { return (elements + 7) / 8; }

std::int64_t body_bytes(const ChangeStats& stats) {
  return mask_bytes(stats.elements) + stats.changed * stats.element_bytes;
}

void write(std::span<const std::byte> baseline, std::span<const std::byte> current, const ChangeStats& stats,
           std::span<std::byte> out) {
  const std::int64_t mask = mask_bytes(stats.elements);
  std::fill_n(out.data(), mask, std::byte{0});
  with_element_type(stats.element_bytes, [&]<class T>(T) {
    PlaneWriter<T> planes(out.data() + mask, stats.changed);
    for_each_changed_element<T>(baseline, current, [&](std::int64_t i, T x) {
      out[static_cast<std::size_t>(i / 8)] |= static_cast<std::byte>(1u << (i % 8));
      planes.put(x);
    });
  });
}

// The mask's set bits must be the header's changed elements, none of them past the chunk's end.
Result<void> check_mask(std::span<const std::byte> mask, std::int64_t elements, std::int64_t changed) {
  std::int64_t set = 0;
  for (std::int64_t w = 0; w < word_count(static_cast<std::int64_t>(mask.size())); ++w)
    set += std::popcount(load_word(mask, w));
  if (set != changed)
    return parse_error(
        fmt::format("bitmask body: {} bits set, the header says {} elements changed", set, changed));
  if (elements % 8 != 0 && (static_cast<std::uint8_t>(mask.back()) >> (elements % 8)) != 0)
    return parse_error(fmt::format("bitmask body: bits set past the chunk's {} elements", elements));
  return {};
}

struct Changes {
  // Calls visit(element index, XOR value) for every set bit, after checking the body whole.
  template <class T, class Visit>
  static Result<void> list(std::span<const std::byte> body, const DeltaHeader& header, Visit& visit) {
    const std::int64_t elements = header.chunk_bytes / header.element_bytes;
    const std::int64_t mask = mask_bytes(elements);
    const std::int64_t changed = header.changed_elements;
    if (static_cast<std::int64_t>(body.size()) != mask + changed * header.element_bytes)
      return parse_error(fmt::format("bitmask body of {} bytes; a mask of {} and {} values of {} take {}",
                                     body.size(), mask, changed, header.element_bytes,
                                     mask + changed * header.element_bytes));
    REFIT_TRY(check_mask(body.first(static_cast<std::size_t>(mask)), elements, changed));
    PlaneReader<T> planes(body.data() + mask, changed);
    for (std::int64_t w = 0; w < word_count(mask); ++w)
      for (std::uint64_t bits = load_word(body.first(static_cast<std::size_t>(mask)), w); bits != 0;
           bits &= bits - 1)
        visit(w * 64 + std::countr_zero(bits), planes.next());
    return {};
  }
};

}  // namespace

const PositionCoder& bitmask_coder() {
  static constexpr PositionCoder coder{.id = DeltaEncoding::kBitmask,
                                       .body_bytes = body_bytes,
                                       .write = write,
                                       .check = check_changes<Changes>,
                                       .apply = apply_changes<Changes>};
  return coder;
}

}  // namespace refit::delta
