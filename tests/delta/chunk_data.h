#pragma once
// Chunks for the delta codec's tests: random bytes, the adversarial changes of a chunk (none, all,
// alternating, NaN payloads, signed zeros, denormals, long gaps), and a round trip through a codec.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "refit/delta/codec.h"

namespace refit::testing {

using ByteVector = std::vector<std::byte>;

inline ByteVector random_bytes(std::size_t n, std::mt19937_64& rng) {
  ByteVector out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng());
  return out;
}

// A baseline and what it became, named for the failure messages.
struct ChunkPair {
  std::string name;
  DType dtype = DType::kBF16;
  ByteVector baseline;
  ByteVector current;
};

// Element `i` of `bytes` as an integer of `width` bytes, and its setter.
inline std::uint64_t element(const ByteVector& bytes, std::int64_t width, std::int64_t i) {
  std::uint64_t v = 0;
  std::memcpy(&v, bytes.data() + i * width, static_cast<std::size_t>(width));
  return v;
}
inline void set_element(ByteVector& bytes, std::int64_t width, std::int64_t i, std::uint64_t v) {
  std::memcpy(bytes.data() + i * width, &v, static_cast<std::size_t>(width));
}

// Elements whose bits differ: the brute-force count the header's changed_elements must equal.
inline std::int64_t changed_elements(const ChunkPair& c) {
  const std::int64_t width = dtype_size(c.dtype);
  std::int64_t n = 0;
  for (std::int64_t i = 0; i * width < static_cast<std::int64_t>(c.baseline.size()); ++i)
    n += element(c.baseline, width, i) != element(c.current, width, i) ? 1 : 0;
  return n;
}

using ElementRule = std::function<std::uint64_t(std::int64_t, std::uint64_t)>;

// `elements` elements of `dtype`: random bits, or before(i, random bits) when given; then `change`
// applied to a copy: change(i, bits) gives element i's new bits.
inline ChunkPair make_pair(std::string name, DType dtype, std::int64_t elements, std::mt19937_64& rng,
                           const ElementRule& change, const ElementRule& before = nullptr) {
  const std::int64_t width = dtype_size(dtype);
  ChunkPair c{.name = std::move(name), .dtype = dtype, .baseline = random_bytes(elements * width, rng)};
  const std::uint64_t mask = width == 8 ? ~0ull : (1ull << (8 * width)) - 1;
  if (before)
    for (std::int64_t i = 0; i < elements; ++i)
      set_element(c.baseline, width, i, before(i, element(c.baseline, width, i)) & mask);
  c.current = c.baseline;
  for (std::int64_t i = 0; i < elements; ++i)
    set_element(c.current, width, i, change(i, element(c.baseline, width, i)) & mask);
  return c;
}

// The adversarial changes of a chunk of `elements` elements of `dtype`.
inline std::vector<ChunkPair> adversarial_pairs(DType dtype, std::int64_t elements, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::int64_t width = dtype_size(dtype);
  const std::uint64_t top = 1ull << (8 * width - 1);  // the sign bit of a float of this width
  std::vector<ChunkPair> out;
  out.push_back(make_pair("none changed", dtype, elements, rng, [](auto, auto b) { return b; }));
  out.push_back(make_pair("all changed", dtype, elements, rng, [](auto, auto b) { return ~b; }));
  out.push_back(
      make_pair("all changed by one bit", dtype, elements, rng, [](auto, auto b) { return b ^ 1; }));
  out.push_back(
      make_pair("alternating", dtype, elements, rng, [](auto i, auto b) { return i % 2 ? b ^ 1 : b; }));
  out.push_back(make_pair("first and last", dtype, elements, rng,
                          [&](auto i, auto b) { return i == 0 || i == elements - 1 ? b ^ top : b; }));
  out.push_back(
      make_pair("runs of three", dtype, elements, rng, [](auto i, auto b) { return i % 7 < 3 ? b + 1 : b; }));
  // Gaps of 20000 elements need three varint bytes (gap * 2 >= 2^14).
  out.push_back(make_pair("long gaps", dtype, elements, rng,
                          [](auto i, auto b) { return i % 20000 == 19999 ? b ^ 0x55 : b; }));
  // Values that compare equal but differ in bits, or that are not values at all: NaNs whose
  // payload changes (top - 1 is a NaN in every float format: exponent and mantissa all ones),
  // -0.0 <-> +0.0 (the sign bit alone), denormals that move (the lowest bits, exponent zero).
  const std::uint64_t nan = top - 1;
  out.push_back(make_pair(
      "nan payloads", dtype, elements, rng,
      [&](auto i, auto) { return nan - static_cast<std::uint64_t>(i % 5); },
      [&](auto i, auto) { return nan - static_cast<std::uint64_t>(i % 3); }));
  out.push_back(make_pair(
      "signed zeros", dtype, elements, rng, [&](auto i, auto) { return i % 2 ? top : 0; },
      [&](auto i, auto) { return i % 3 ? top : 0; }));
  out.push_back(make_pair(
      "denormals", dtype, elements, rng, [](auto i, auto) { return 1 + static_cast<std::uint64_t>(i % 4); },
      [](auto i, auto) { return 1 + static_cast<std::uint64_t>(i % 3); }));
  out.push_back(make_pair("random", dtype, elements, rng, [&](auto, auto) { return rng(); }));
  return out;
}

// Encodes `c` with `codec` against a baseline both sides know, decodes it onto a copy of the
// baseline, and checks the copy is the current bytes bit for bit; the header, for more checks.
inline DeltaHeader expect_round_trip(DeltaCodec& codec, const ChunkPair& c) {
  SCOPED_TRACE(c.name + " (" + std::string(dtype_name(c.dtype)) + ")");
  const Checksum base = checksum_of(c.baseline);
  ByteVector payload(static_cast<std::size_t>(
      delta_payload_capacity(static_cast<std::int64_t>(c.current.size()), dtype_size(c.dtype))));
  const auto header =
      codec.encode({.baseline = c.baseline, .current = c.current, .dtype = c.dtype, .base = base}, payload);
  EXPECT_TRUE(header.has_value()) << header.error().message;
  if (!header) return {};
  ByteVector receiver = c.baseline;
  const auto result =
      codec.decode(std::span(payload).first(static_cast<std::size_t>(header->payload_bytes())),
                   {.bytes = receiver, .dtype = c.dtype, .base = base, .name = c.name});
  EXPECT_TRUE(result.has_value()) << result.error().message;
  EXPECT_TRUE(receiver == c.current) << delta_format_name(header->format)
                                     << " did not restore the current bytes";
  if (result) EXPECT_EQ(*result, checksum_of(c.current));
  return *header;
}

}  // namespace refit::testing
