#include "refit/delta/synthetic_update.h"

#include <bit>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "refit/delta/mix64.h"

namespace refit {
namespace {

using delta::kGolden;
using delta::mix64;

// A uniform double in [0, 1) from the top 53 bits of `bits`.
double unit(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1p-53; }

// The random bits of element `index` for stream `key` (a seed, or a seed and a step).
std::uint64_t element_bits(std::uint64_t key, std::int64_t index) {
  return mix64(key + (static_cast<std::uint64_t>(index) + 1) * kGolden);
}

float bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

// Round to nearest even, as torch's float -> bfloat16; NaN stays a (quiet) NaN.
std::uint16_t float_to_bf16(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
  return static_cast<std::uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

// The value an element of type T holds as a float, and back; its bits are T.
struct Bf16 {
  using Bits = std::uint16_t;
  static float value(Bits b) { return bf16_to_float(b); }
  static Bits bits(float x) { return float_to_bf16(x); }
};
struct Fp32 {
  using Bits = std::uint32_t;
  static float value(Bits b) { return std::bit_cast<float>(b); }
  static Bits bits(float x) { return std::bit_cast<Bits>(x); }
};

template <class Type, class F>
void for_each_element(std::span<std::byte> bytes, F&& f) {
  using Bits = typename Type::Bits;
  for (std::size_t i = 0; i * sizeof(Bits) < bytes.size(); ++i) {
    Bits b;
    std::memcpy(&b, bytes.data() + i * sizeof(Bits), sizeof(Bits));
    b = f(static_cast<std::int64_t>(i), b);
    std::memcpy(bytes.data() + i * sizeof(Bits), &b, sizeof(Bits));
  }
}

template <class Type>
void fill(std::span<std::byte> bytes, std::int64_t first, std::uint64_t seed) {
  for_each_element<Type>(bytes, [&](std::int64_t i, typename Type::Bits) {
    const std::uint64_t r = element_bits(mix64(seed), first + i);
    // Four 16-bit uniforms summed: mean 2, variance 4/12, so (sum - 2) * sqrt(3) has variance 1.
    double sum = 0;
    for (int k = 0; k < 4; ++k) sum += static_cast<double>((r >> (16 * k)) & 0xffff) / 65536.0;
    return Type::bits(static_cast<float>(0.02 * std::sqrt(3.0) * (sum - 2.0)));
  });
}

template <class Type>
void step(std::span<std::byte> bytes, std::int64_t first, const SyntheticUpdate& u, std::int64_t n) {
  const std::uint64_t key = mix64(u.seed ^ mix64(static_cast<std::uint64_t>(n)));
  for_each_element<Type>(bytes, [&](std::int64_t i, typename Type::Bits b) {
    const std::uint64_t r = element_bits(key, first + i);
    if (unit(r) >= u.change_fraction) return b;
    const float x = Type::value(b);
    const double delta = u.relative_step * std::fabs(x) * (2.0 * unit(mix64(r)) - 1.0);
    const auto moved = Type::bits(static_cast<float>(x + delta));
    return moved != b ? moved : static_cast<typename Type::Bits>(b ^ 1);
  });
}

Result<void> check_span(std::span<std::byte> bytes, DType dtype) {
  if (dtype != DType::kBF16 && dtype != DType::kFP32)
    return unsupported(fmt::format("synthetic weights are bf16 or fp32, not {}", dtype_name(dtype)));
  if (bytes.size() % static_cast<std::size_t>(dtype_size(dtype)) != 0)
    return invalid(fmt::format("{} bytes are not whole {} elements", bytes.size(), dtype_name(dtype)));
  return {};
}

}  // namespace

Result<void> fill_synthetic_weights(std::span<std::byte> bytes, DType dtype, std::int64_t first_element,
                                    std::uint64_t seed) {
  if (auto ok = check_span(bytes, dtype); !ok) return ok;
  if (first_element < 0) return invalid(fmt::format("first element {} is negative", first_element));
  if (dtype == DType::kBF16)
    fill<Bf16>(bytes, first_element, seed);
  else
    fill<Fp32>(bytes, first_element, seed);
  return {};
}

Result<void> apply_synthetic_step(std::span<std::byte> bytes, DType dtype, std::int64_t first_element,
                                  const SyntheticUpdate& update, std::int64_t step_index) {
  if (auto ok = check_span(bytes, dtype); !ok) return ok;
  if (first_element < 0) return invalid(fmt::format("first element {} is negative", first_element));
  if (!(update.change_fraction >= 0.0 && update.change_fraction <= 1.0))
    return out_of_range(fmt::format("change fraction {} is not in [0, 1]", update.change_fraction));
  if (!(update.relative_step >= 0.0 && std::isfinite(update.relative_step)))
    return out_of_range(fmt::format("relative step {} is not a finite number >= 0", update.relative_step));
  if (step_index < 1) return out_of_range(fmt::format("step {} is not >= 1", step_index));
  if (dtype == DType::kBF16)
    step<Bf16>(bytes, first_element, update, step_index);
  else
    step<Fp32>(bytes, first_element, update, step_index);
  return {};
}

}  // namespace refit
