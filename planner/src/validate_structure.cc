// validate_structure: the rules of plan.h that need the plan alone. Every consumer indexes by
// them (tensors, ranks, `via`), so a malformed plan (say, a hand-edited JSON file) is refused
// here instead of being read out of bounds; validate() adds the rules that need the problem.
#include <fmt/format.h>

#include "refit/core/checked.h"
#include "refit/core/overlap.h"
#include "refit/core/try.h"
#include "refit/planner/plan.h"

namespace refit {
namespace {

// Box::whole(shape).contains(box) without making the whole box: this runs for every segment.
bool inside(const Box& box, const Shape& shape) {
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (box.offset[d] < 0 || box.offset[d] + box.extent[d] > shape[d]) return false;
  return true;
}

Result<void> check_segment(const Plan& plan, const Transfer& t, const Segment& s) {
  if (s.tensor >= plan.tensors.size())
    return out_of_range(
        fmt::format("tensor index {} does not exist ({} tensors)", s.tensor, plan.tensors.size()));
  const auto& tensor = plan.tensors[s.tensor];
  if (s.box.offset.size() != tensor.shape.size() || s.box.extent.size() != tensor.shape.size() ||
      s.box.empty() || !inside(s.box, tensor.shape))
    return invalid(fmt::format("box {} is empty or outside tensor '{}'", s.box.to_string(), tensor.name));
  if (s.via == kFromSourceShard) return {};
  if (s.via < 0 || s.via >= t.id) return invalid(fmt::format("via {} is not an earlier transfer", s.via));
  if (plan.transfers[static_cast<std::size_t>(s.via)].receiver != t.sender)
    return invalid(fmt::format("via transfer {} was not received by sender rank {}", s.via, t.sender.value));
  return {};
}

// Only a rank's quantize step stays on the rank: fp8 made at a landing rank, over kLocal.
Result<void> check_quantize_step(const Plan& plan, const Transfer& t) {
  if (t.link != LinkKind::kLocal)
    return invalid("sender and receiver are the same rank (only a quantize step, over local, does that)");
  for (const auto& s : t.segments) {
    const auto& q = s.tensor < plan.tensors.size() ? plan.tensors[s.tensor].quantization : std::nullopt;
    if (!q || !q->made_at_landing())
      return invalid(fmt::format(
          "sender and receiver are the same rank, but tensor {} is not made at landing ranks (only fp8 "
          "values and scales of weights quantized there are made in a quantize step)",
          s.tensor));
  }
  return {};
}

Result<void> check_transfer(const Plan& plan, const Transfer& t, std::size_t index) {
  if (t.id != static_cast<std::int32_t>(index)) return invalid(fmt::format("id is {}", t.id));
  for (const Rank r : {t.sender, t.receiver})
    if (r.value < 0 || r.value >= plan.world_size())
      return out_of_range(fmt::format("rank {} does not exist ({} ranks)", r.value, plan.world_size()));
  if (t.segments.empty()) return invalid("no segments");
  if (t.quantizes()) REFIT_TRY(check_quantize_step(plan, t));
  REFIT_TRY(check_chunk(t.chunk));
  std::int64_t sum = 0;
  for (std::size_t k = 0; k < t.segments.size(); ++k) {
    REFIT_TRY_IN(check_segment(plan, t, t.segments[k]), fmt::format("segments[{}]", k));
    sum = REFIT_TRY_IN(checked_add(sum, plan.segment_bytes(t.segments[k]).value, limits::kMaxBytes, "bytes"),
                       fmt::format("segments[{}]", k));
  }
  if (sum != t.bytes.value)
    return invalid(fmt::format("bytes is {}, the segments add up to {}", t.bytes.value, sum));
  return {};
}

// Tensor shapes within the element cap, so that segment and transfer bytes cannot overflow.
Result<void> check_tensors(const Plan& plan) {
  for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
    const auto& t = plan.tensors[i];
    const auto at = fmt::format("tensors[{}] '{}'", i, t.name);
    if (t.shape.empty() || t.shape.size() > kMaxTensorDims)
      return out_of_range(fmt::format("{}: {} dims (1 to {})", at, t.shape.size(), kMaxTensorDims));
    for (const auto extent : t.shape)
      if (extent < 0) return out_of_range(fmt::format("{}: a negative size", at));
    REFIT_TRY_IN(checked_product(t.shape, limits::kMaxElements, "elements"), at);
  }
  return {};
}

}  // namespace

Result<void> check_chunk(Bytes chunk) {
  // Capped where products of it (a relay slice of several chunks, a window of them) stay far
  // inside int64: 2^62 made relay slices wrap to nothing.
  if (chunk.value <= 0 || chunk.value > limits::kMaxBytes)
    return out_of_range(
        fmt::format("chunk must be > 0 and at most 2^56 bytes (the most a plan moves), got {}", chunk.value));
  return {};
}

Result<void> check_chunk_count(const Plan& plan) {
  std::int64_t chunks = 0;
  for (const auto& t : plan.transfers) {
    if (t.chunk.value <= 0 || t.bytes.value < 0) continue;  // check_transfer's to refuse
    chunks += ceil_div(t.bytes.value, t.chunk.value);
    if (chunks > limits::kMaxPlanChunks)
      return out_of_range(
          fmt::format("chunk: {} bytes cut the plan into more than {} chunks (transfer {} of "
                      "{}); choose a larger chunk",
                      t.chunk.value, limits::kMaxPlanChunks, t.id, plan.transfers.size()));
  }
  return {};
}

Result<void> check_chunk_count(const ReshardProblem& problem, std::span<const Overlap> overlaps, Bytes chunk,
                               std::int64_t max_chunks) {
  if (chunk.value <= 0) return {};  // check_chunk's to refuse
  std::int64_t chunks = 0;
  for (std::size_t i = 0; i < overlaps.size(); ++i) {
    const auto& tensor = problem.tensors()[i].tensor;
    if (tensor.quantization) continue;  // made or shrunk on the way: no bound taken
    for (const auto& d : overlaps[i].destinations) {
      // At most 2^51 (2^48 elements of 8 bytes), so neither product below wraps.
      const auto per_copy = d.shard.box.volume() * dtype_size(tensor.dtype) / chunk.value;
      const auto copies = static_cast<std::int64_t>(d.shard.holders.size());
      if (per_copy > 0 && copies > (max_chunks - chunks) / per_copy)
        return out_of_range(
            fmt::format("chunk: {} bytes cut the plan into more than {} chunks (counted up to "
                        "tensor '{}', whose shard on {} destination ranks takes {} or more on each); "
                        "choose a larger chunk",
                        chunk.value, max_chunks, tensor.name, copies, per_copy));
      chunks += per_copy * copies;
    }
  }
  return {};
}

Result<void> validate_structure(const Plan& plan) {
  for (const auto ranks : {plan.source_ranks, plan.destination_ranks})
    if (ranks < 0 || ranks > limits::kMaxRanks)
      return out_of_range(fmt::format("the plan has {} source and {} destination ranks (0 to {} each)",
                                      plan.source_ranks, plan.destination_ranks, limits::kMaxRanks));
  REFIT_TRY(check_tensors(plan));
  for (std::size_t i = 0; i < plan.transfers.size(); ++i)
    REFIT_TRY_IN(check_transfer(plan, plan.transfers[i], i), fmt::format("transfers[{}]", i));
  return check_chunk_count(plan);
}

}  // namespace refit
