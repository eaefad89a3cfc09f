#include "plan_shape.h"

#include <fmt/format.h>

#include "device_copy.h"

namespace refit::nccl_detail {
namespace {

Result<void> check_segment(const Plan& plan, const Transfer& t, const Segment& s) {
  if (s.tensor >= plan.tensors.size())
    return invalid(fmt::format("tensor index {} does not exist", s.tensor));
  const auto& tensor = plan.tensors[s.tensor];
  if (tensor.shape.size() > static_cast<std::size_t>(kMaxCopyDims) ||
      s.box.offset.size() != tensor.shape.size() || s.box.extent.size() != tensor.shape.size() ||
      s.box.empty() || !Box::whole(tensor.shape).contains(s.box))
    return invalid(fmt::format("box {} is empty or outside tensor '{}'", s.box.to_string(), tensor.name));
  const auto es = dtype_size(tensor.dtype);
  if (es != 1 && es != 2 && es != 4 && es != 8)
    return invalid(fmt::format("tensor '{}' has {}-byte elements", tensor.name, es));
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
      return invalid(fmt::format("rank {} does not exist ({} ranks)", r.value, plan.world_size()));
  if (t.sender == t.receiver) return invalid("sender and receiver are the same rank");
  Bytes sum{0};
  for (std::size_t k = 0; k < t.segments.size(); ++k) {
    if (auto ok = check_segment(plan, t, t.segments[k]); !ok)
      return std::unexpected(std::move(ok.error()).in(fmt::format("segments[{}]", k)));
    sum += plan.segment_bytes(t.segments[k]);
  }
  if (sum != t.bytes || sum.value == 0)
    return invalid(fmt::format("bytes is {}, the segments add up to {}", t.bytes.value, sum.value));
  return {};
}

}  // namespace

Result<void> check_plan_shape(const Plan& plan) {
  for (std::size_t i = 0; i < plan.transfers.size(); ++i)
    if (auto ok = check_transfer(plan, plan.transfers[i], i); !ok)
      return std::unexpected(std::move(ok.error()).in(fmt::format("transfers[{}]", i)));
  return {};
}

}  // namespace refit::nccl_detail
