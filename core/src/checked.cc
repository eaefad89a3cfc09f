#include "refit/core/checked.h"

#include <fmt/format.h>

namespace refit {

std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

Result<std::int64_t> checked_product(std::span<const std::int64_t> values, std::int64_t limit,
                                     std::string_view what) {
  std::int64_t product = 1;
  for (const auto v : values) {
    const auto next = checked_mul(product, v);
    if (!next || *next > limit)
      return out_of_range(fmt::format("{}: product of sizes exceeds {}", what, limit));
    product = *next;
  }
  return product;
}

Result<std::int64_t> checked_mul(std::int64_t a, std::int64_t b, std::int64_t limit, std::string_view what) {
  const auto product = checked_mul(a, b);
  if (!product || *product > limit)
    return out_of_range(fmt::format("{}: {} x {} exceeds {}", what, a, b, limit));
  return *product;
}

Result<std::int64_t> checked_add(std::int64_t a, std::int64_t b, std::int64_t limit, std::string_view what) {
  const auto sum = checked_add(a, b);
  if (!sum || *sum > limit) return out_of_range(fmt::format("{}: {} + {} exceeds {}", what, a, b, limit));
  return *sum;
}

std::optional<std::int64_t> strided_end(std::int64_t offset, std::span<const std::int64_t> extents,
                                        std::span<const std::int64_t> strides) {
  if (extents.size() != strides.size()) return std::nullopt;
  std::optional<std::int64_t> last = offset;
  for (std::size_t d = 0; d < extents.size() && last; ++d) {
    if (strides[d] < 0 || (strides[d] == 0 && extents[d] > 1) || extents[d] < 1) return std::nullopt;
    const auto reach = checked_mul(extents[d] - 1, strides[d]);
    last = reach ? checked_add(*last, *reach) : std::nullopt;
  }
  return last ? checked_add(*last, 1) : std::nullopt;
}

}  // namespace refit
