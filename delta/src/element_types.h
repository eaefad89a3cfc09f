#pragma once
// The unsigned integer type of an element of 1, 2, 4 or 8 bytes: the codec compares and XORs an
// element's bits as one integer of its width, whatever it means (bf16, fp8, an fp32 scale).
#include <cstdint>
#include <utility>

namespace refit::delta {

// f(T{}) with T the unsigned type of `element_bytes` (1, 2, 4 or 8, as read_delta_header and the
// codec check), so that the loops are compiled once per width.
template <class F>
decltype(auto) with_element_type(std::int64_t element_bytes, F&& f) {
  if (element_bytes == 1) return std::forward<F>(f)(std::uint8_t{});
  if (element_bytes == 2) return std::forward<F>(f)(std::uint16_t{});
  if (element_bytes == 4) return std::forward<F>(f)(std::uint32_t{});
  return std::forward<F>(f)(std::uint64_t{});
}

}  // namespace refit::delta
