#include "refit/planner/plan.h"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "refit/core/fingerprint.h"

namespace refit {

std::string_view link_kind_name(LinkKind k) { return kLinkKindNames.at(static_cast<std::size_t>(k)); }

Result<LinkKind> parse_link_kind(std::string_view name) {
  const auto* found = std::ranges::find(kLinkKindNames, name);
  if (found != kLinkKindNames.end())
    return static_cast<LinkKind>(std::distance(kLinkKindNames.begin(), found));
  return parse_error(fmt::format("link '{}' is not {}", name, fmt::join(kLinkKindNames, ", ")));
}

std::vector<std::int32_t> Transfer::upstream() const {
  std::vector<std::int32_t> out;
  for (const auto& s : segments)
    if (s.via != kFromSourceShard) out.push_back(s.via);
  std::ranges::sort(out);
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<RankSchedule> schedules(const Plan& plan) {
  std::vector<RankSchedule> out(static_cast<std::size_t>(plan.world_size()));
  for (const auto& t : plan.transfers) {
    out[static_cast<std::size_t>(t.sender.value)].sends.push_back(t.id);
    out[static_cast<std::size_t>(t.receiver.value)].receives.push_back(t.id);
  }
  return out;
}

std::uint64_t plan_hash(const Plan& plan) {
  Fingerprint h;
  h.add(plan.strategy);
  h.add(execution_model(plan.execution).name);
  h.add(static_cast<std::uint64_t>(plan.source_ranks));
  h.add(static_cast<std::uint64_t>(plan.destination_ranks));
  for (const auto& t : plan.tensors) h.add(t);
  for (const auto& t : plan.transfers) {
    h.add(static_cast<std::uint64_t>(t.sender.value));
    h.add(static_cast<std::uint64_t>(t.receiver.value));
    h.add(static_cast<std::uint64_t>(t.link));
    h.add(static_cast<std::uint64_t>(t.chunk.value));
    for (const auto& s : t.segments) {
      h.add(s.tensor);
      h.add(static_cast<std::uint64_t>(static_cast<std::int64_t>(s.via)));
      h.add(s.box.offset);
      h.add(s.box.extent);
    }
  }
  return h.value();
}

std::string plan_hash_hex(const Plan& plan) { return fmt::format("{:016x}", plan_hash(plan)); }

}  // namespace refit
