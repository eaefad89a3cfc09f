// validate_structure: the rules of plan.h that need the plan alone. Every consumer indexes by
// them (tensors, ranks, `via`), so a malformed plan (say, a hand-edited JSON file) is refused
// here instead of being read out of bounds; validate() adds the rules that need the problem.
#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/planner/plan.h"

namespace refit {
namespace {

Result<void> check_segment(const Plan& plan, const Transfer& t, const Segment& s) {
  if (s.tensor >= plan.tensors.size())
    return out_of_range(
        fmt::format("tensor index {} does not exist ({} tensors)", s.tensor, plan.tensors.size()));
  const auto& tensor = plan.tensors[s.tensor];
  if (s.box.offset.size() != tensor.shape.size() || s.box.extent.size() != tensor.shape.size() ||
      s.box.empty() || !Box::whole(tensor.shape).contains(s.box))
    return invalid(fmt::format("box {} is empty or outside tensor '{}'", s.box.to_string(), tensor.name));
  if (s.via == kFromSourceShard) return {};
  if (s.via < 0 || s.via >= t.id) return invalid(fmt::format("via {} is not an earlier transfer", s.via));
  if (plan.transfers[static_cast<std::size_t>(s.via)].receiver != t.sender)
    return invalid(fmt::format("via transfer {} was not received by sender rank {}", s.via, t.sender.value));
  return {};
}

Result<void> check_transfer(const Plan& plan, const Transfer& t, std::size_t index) {
  if (t.id != static_cast<std::int32_t>(index)) return invalid(fmt::format("id is {}", t.id));
  for (const Rank r : {t.sender, t.receiver})
    if (r.value < 0 || r.value >= plan.world_size())
      return out_of_range(fmt::format("rank {} does not exist ({} ranks)", r.value, plan.world_size()));
  if (t.sender == t.receiver) return invalid("sender and receiver are the same rank");
  if (t.segments.empty()) return invalid("no segments");
  if (t.chunk.value <= 0) return out_of_range("chunk must be > 0 bytes");
  Bytes sum{0};
  for (std::size_t k = 0; k < t.segments.size(); ++k) {
    REFIT_TRY_IN(check_segment(plan, t, t.segments[k]), fmt::format("segments[{}]", k));
    sum += plan.segment_bytes(t.segments[k]);
  }
  if (sum != t.bytes)
    return invalid(fmt::format("bytes is {}, the segments add up to {}", t.bytes.value, sum.value));
  return {};
}

}  // namespace

Result<void> validate_structure(const Plan& plan) {
  if (plan.source_ranks < 0 || plan.destination_ranks < 0)
    return out_of_range(fmt::format("the plan has {} source and {} destination ranks", plan.source_ranks,
                                    plan.destination_ranks));
  for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
    const auto& t = plan.tensors[i];
    if (t.shape.empty() || t.shape.size() > kMaxTensorDims)
      return out_of_range(
          fmt::format("tensors[{}] '{}': {} dims (1 to {})", i, t.name, t.shape.size(), kMaxTensorDims));
  }
  for (std::size_t i = 0; i < plan.transfers.size(); ++i)
    REFIT_TRY_IN(check_transfer(plan, plan.transfers[i], i), fmt::format("transfers[{}]", i));
  return {};
}

}  // namespace refit
