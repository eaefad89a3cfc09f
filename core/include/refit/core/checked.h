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
// Tensors of one problem, a model's or a manifest's: Kimi-K2 with one tensor per expert has
// 61 x 384 x 3 = 70k.
inline constexpr std::int64_t kMaxTensors = std::int64_t{1} << 20;
// Elements of one tensor (2^48 = 281e12: 563 TB of bf16).
inline constexpr std::int64_t kMaxElements = std::int64_t{1} << 48;
// Bytes of a whole problem or plan (2^56 = 72 PB).
inline constexpr std::int64_t kMaxBytes = std::int64_t{1} << 56;
// Mesh positions of all the layouts of one problem, both sides summed over its tensors: 2^27 (134M,
// about 4 GB of layouts). Kimi-K2 with one tensor per expert on 256 + 128 ranks has 27M.
inline constexpr std::int64_t kMaxLayoutPositions = std::int64_t{1} << 27;
// Chunks the lowering materialises (8 bytes or more each) for an executor or the simulator:
// 2^28 = 268M, 2 GB and more; also the most a plan refit's executors run may be planned with.
// Real plans run through refit's executors need up to 64M (Kimi-K2's m2n-ring plan, 16.7 TB in
// 256 KiB chunks).
inline constexpr std::int64_t kMaxChunks = std::int64_t{1} << 28;
// Chunks a plan may describe, counted but not materialised: 2^34 = 17G. NeMo RL's
// gather-broadcast plans describe up to 2.5G (Kimi-K2: 1.3 PB in 512 KiB steps) and are simulated
// as calls without being lowered; a 1-byte chunk on an 8B model (33G chunks, once 4.5 GB and 30 s)
// stays refused.
inline constexpr std::int64_t kMaxPlanChunks = std::int64_t{1} << 34;
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

// One past the last element a strided box touches: offset + sum((extent[d] - 1) * strides[d]) + 1,
// for a non-empty box of `extents` with one stride per dim (elements, or bytes). nullopt when a
// stride is negative, is 0 along a dim of more than one element (two elements in one place), or
// the sum overflows.
[[nodiscard]] std::optional<std::int64_t> strided_end(std::int64_t offset,
                                                      std::span<const std::int64_t> extents,
                                                      std::span<const std::int64_t> strides);

}  // namespace refit
