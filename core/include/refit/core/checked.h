#pragma once
// Checked arithmetic on sizes read from input (shapes, meshes, counts, bytes). Every product or
// round-up of sizes that a user controls goes through these, so a hostile input gives an error
// that names it instead of a wrapped, negative size. The bare functions return nullopt on
// overflow; the Result forms say what overflowed, and past which limit.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "refit/core/error.h"

namespace refit {

// Caps on what refit reads: far above any real job, low enough that every product of them that
// refit forms (elements x dtype size, ranks x tensors, ...) stays far inside int64.
namespace limits {
// Ranks of one side (training or inference), mesh positions, GPUs, nodes.
inline constexpr std::int64_t kMaxRanks = std::int64_t{1} << 20;
// Global ranks of the job: both sides.
inline constexpr std::int64_t kMaxJobRanks = 2 * kMaxRanks;
// Elements of one tensor (2^48 = 281e12: 563 TB of bf16).
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 48;
// Bytes of a whole problem or plan (2^56 = 72 PB).
inline constexpr std::int64_t kMaxBytes = std::int64_t{1} << 56;
// Chunks of a whole plan: each is materialised (8 bytes or more) by the lowering and simulated.
// 2^24 = 16.7M: a 16 GB model in 4 KiB chunks, twice over.
inline constexpr std::int64_t kMaxChunks = std::int64_t{1} << 24;
}  // namespace limits

[[nodiscard]] std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b);
[[nodiscard]] std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b);
// ceil(a / b) for a >= 0 and b > 0, without the overflow of (a + b - 1) / b.
[[nodiscard]] std::int64_t ceil_div(std::int64_t a, std::int64_t b);

// The product of `values`, or an error "<what>: product of sizes exceeds <limit>" when it is
// larger than `limit` or overflows on the way. Values must be >= 0.
[[nodiscard]] Result<std::int64_t> checked_product(std::span<const std::int64_t> values, std::int64_t limit,
                                                   std::string_view what);
// a * b, or an error naming `what` when the product exceeds `limit`. a, b >= 0.
[[nodiscard]] Result<std::int64_t> checked_mul(std::int64_t a, std::int64_t b, std::int64_t limit,
                                               std::string_view what);
// a + b, or an error naming `what` when the sum exceeds `limit`. a, b >= 0.
[[nodiscard]] Result<std::int64_t> checked_add(std::int64_t a, std::int64_t b, std::int64_t limit,
                                               std::string_view what);

}  // namespace refit
