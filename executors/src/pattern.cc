#include "refit/executors/pattern.h"

#include <cstring>

#include <fmt/format.h>

#include "refit/quantize/quantize.h"

namespace refit {
namespace {

// Walks the box row-major, calling f(global flat index, position in the box) per element.
template <class F>
void for_each_element(const Shape& shape, const Box& box, F&& f) {
  if (box.empty()) return;
  const std::size_t dims = shape.size();
  Shape point = box.offset;
  std::int64_t local = 0;
  while (true) {
    std::int64_t global = 0;
    for (std::size_t d = 0; d < dims; ++d) global = global * shape[d] + point[d];
    if (!f(global, local++)) return;
    std::size_t d = dims;
    while (d > 0) {
      --d;
      if (++point[d] < box.offset[d] + box.extent[d]) break;
      point[d] = box.offset[d];
      if (d == 0) return;
    }
  }
}

}  // namespace

std::uint64_t pattern_value(std::uint32_t tensor, std::int64_t global_index) {
  // splitmix64 of (tensor, index): neighbouring elements and tensors differ in every byte.
  std::uint64_t z = (static_cast<std::uint64_t>(tensor) << 40) ^ static_cast<std::uint64_t>(global_index);
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void fill_pattern(std::uint32_t tensor, const Shape& shape, const Box& box, std::int64_t element_size,
                  std::span<std::byte> out) {
  const auto size = static_cast<std::size_t>(element_size);
  for_each_element(shape, box, [&](std::int64_t global, std::int64_t local) {
    const std::uint64_t v = pattern_value(tensor, global);
    std::memcpy(out.data() + static_cast<std::size_t>(local) * size, &v, size);
    return true;
  });
}

void fill_bf16_weight_pattern(std::uint32_t tensor, const Shape& shape, const Box& box,
                              std::span<std::byte> out) {
  for_each_element(shape, box, [&](std::int64_t global, std::int64_t local) {
    const std::uint64_t v = pattern_value(tensor, global);
    // Sign, a biased exponent in [112, 136) (2^-15 .. 2^8 and up), 7 mantissa bits.
    const auto bits =
        static_cast<std::uint16_t>(((v & 1) << 15) | ((112 + (v >> 1) % 24) << 7) | ((v >> 8) & 0x7F));
    std::memcpy(out.data() + static_cast<std::size_t>(local) * sizeof bits, &bits, sizeof bits);
    return true;
  });
}

QuantizedPattern quantized_pattern(std::uint32_t tensor, const TensorSpec& weight, const Box& box) {
  const auto scheme = weight.quantization->scheme;
  std::vector<std::byte> bf16(static_cast<std::size_t>(box.volume() * dtype_size(DType::kBF16)));
  fill_bf16_weight_pattern(tensor, weight.shape, box, bf16);
  QuantizedPattern out{
      .values = std::vector<std::byte>(static_cast<std::size_t>(box.volume())),
      .scales = std::vector<std::byte>(static_cast<std::size_t>(scale_buffer_bytes(scheme, box.extent)))};
  quantize(scheme,
           Bf16View{.data = reinterpret_cast<const std::uint16_t*>(bf16.data()),
                    .shape = box.extent,
                    .strides = row_major_strides(box.extent)},
           std::span(reinterpret_cast<std::uint8_t*>(out.values.data()), out.values.size()), out.scales);
  return out;
}

Result<void> verify_pattern(std::uint32_t tensor, const Shape& shape, const Box& box,
                            std::int64_t element_size, std::span<const std::byte> data) {
  const auto size = static_cast<std::size_t>(element_size);
  if (data.size() < static_cast<std::size_t>(box.volume()) * size)
    return mismatch(
        fmt::format("buffer of {} bytes is smaller than the box {}", data.size(), box.to_string()));
  std::int64_t bad = -1;
  for_each_element(shape, box, [&](std::int64_t global, std::int64_t local) {
    const std::uint64_t v = pattern_value(tensor, global);
    if (std::memcmp(data.data() + static_cast<std::size_t>(local) * size, &v, size) == 0) return true;
    bad = global;
    return false;
  });
  if (bad >= 0)
    return fail(ErrorCode::kRuntime, fmt::format("element {} (global row-major index) is wrong", bad));
  return {};
}

std::vector<std::uint32_t> values_source_of(const ReshardProblem& problem) {
  std::vector<TensorSpec> specs;
  for (const auto& t : problem.tensors()) specs.push_back(t.tensor);
  std::vector<std::uint32_t> out(specs.size());
  for (std::uint32_t t = 0; t < out.size(); ++t) out[t] = t;
  for (const auto& w : landing_weights(specs)) out[w.values] = w.copy;
  return out;
}

}  // namespace refit
