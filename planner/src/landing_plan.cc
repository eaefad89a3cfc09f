// Plans of problems with weights quantized at their landing ranks (core/quantization.h), for any
// strategy. The strategy plans twice: once every tensor but what the landing ranks make (the
// landing copies among them, bf16 to one replica), once only that (fp8 values and scales from
// the landing ranks, its sources, to every replica). Between the two each landing rank gets a
// quantize step (Transfer::quantizes), which makes its own boxes and feeds the second plan.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "refit/core/index.h"
#include "refit/core/quantization.h"
#include "refit/core/try.h"
#include "strategies.h"

namespace refit::planner_detail {
namespace {

bool made_at_landing(const TensorReshard& t) {
  return t.tensor.quantization && t.tensor.quantization->made_at_landing();
}

// The landing ranks hold their own boxes once their quantize steps ran: they need nothing more.
void drop_landing_ranks(Overlap& o) {
  for (auto& d : o.destinations)
    std::erase_if(d.shard.holders, [&](Rank r) {
      return std::ranges::any_of(o.sources, [&](const Shard& s) {
        return s.box == d.shard.box && std::ranges::find(s.holders, r) != s.holders.end();
      });
    });
  std::erase_if(o.destinations, [](const DestinationShard& d) { return d.shard.holders.empty(); });
}

// `c` with only the tensors made at landing ranks (`landing_made`) or only the others: the
// strategy plans nothing of the rest.
PlanContext stage(const PlanContext& c, bool landing_made) {
  PlanContext out{.problem = c.problem,
                  .cluster = c.cluster,
                  .strategy = c.strategy,
                  .options = c.options,
                  .overlaps = c.overlaps};
  for (std::size_t t = 0; t < out.overlaps.size(); ++t) {
    if (made_at_landing(c.problem.tensors()[t]) != landing_made)
      out.overlaps[t] = Overlap{};
    else if (landing_made)
      drop_landing_ranks(out.overlaps[t]);
  }
  return out;
}

// Where the first plan delivers each landing copy: (transfer, segment) by (receiver, tensor).
using Deliveries =
    std::map<std::pair<std::int32_t, std::uint32_t>, std::vector<std::pair<std::int32_t, const Segment*>>>;

Deliveries deliveries(const Plan& first, const std::vector<LandingWeight>& weights) {
  std::vector<bool> copy(first.tensors.size(), false);
  for (const auto& w : weights) copy[w.copy] = true;
  Deliveries out;
  for (const auto& t : first.transfers)
    for (const auto& s : t.segments)
      if (copy[s.tensor]) out[{t.receiver.value, s.tensor}].emplace_back(t.id, &s);
  return out;
}

// Each landing rank's quantize step: per weight it lands, its values as the landing copy's
// transfers to it brought them (one segment each, cut to its box), then the scales of its box.
std::map<std::int32_t, Transfer> quantize_steps(const ReshardProblem& problem, const Plan& first,
                                                const PlanOptions& options) {
  const auto weights = landing_weights(first.tensors);
  const auto delivered = deliveries(first, weights);
  std::map<std::int32_t, Transfer> steps;
  for (const auto& w : weights) {
    const auto& values = problem.tensors()[w.values];
    const auto scheme = values.tensor.quantization->scheme;
    for (const Shard& shard : distinct_shards(values.source))
      for (const Rank r : shard.holders) {
        auto& step = steps[r.value];
        step.sender = step.receiver = r;
        step.link = LinkKind::kLocal;
        step.chunk = options.chunk;
        if (const auto it = delivered.find({r.value, w.copy}); it != delivered.end())
          for (const auto& [transfer, s] : it->second)
            if (auto mine = intersect(s->box, shard.box))
              step.segments.push_back(Segment{.tensor = w.values, .box = std::move(*mine), .via = transfer});
        step.segments.push_back(Segment{.tensor = w.scales, .box = quant_scale_box(scheme, shard.box)});
      }
  }
  return steps;
}

}  // namespace

bool has_landing(const ReshardProblem& problem) {
  return std::ranges::any_of(problem.tensors(), made_at_landing);
}

Result<Plan> plan_with_landing(const PlanContext& c) {
  if (!c.strategy.sends_from_holders)
    return unsupported(fmt::format(
        "strategy '{}' sends every tensor from training rank 0, so it cannot send fp8 from the ranks "
        "that quantize weights at landing; plan it with --quantize-at receiver (as it is deployed) or "
        "sender",
        c.strategy.name));
  Plan plan = REFIT_TRY(c.strategy.plan(stage(c, false)));
  const Plan second = REFIT_TRY(c.strategy.plan(stage(c, true)));
  std::vector<std::int32_t> step_of(at(plan.world_size()), kFromSourceShard);
  for (auto& [rank, step] : quantize_steps(c.problem, plan, c.options)) {
    step.id = static_cast<std::int32_t>(plan.transfers.size());
    for (const auto& s : step.segments) step.bytes += plan.segment_bytes(s);
    step_of[at(rank)] = step.id;
    plan.transfers.push_back(std::move(step));
  }
  // The second plan's ids follow; what a landing rank sends as a source comes from its step.
  // (No transfer goes to a landing rank: drop_landing_ranks took them off the destinations.)
  const auto offset = static_cast<std::int32_t>(plan.transfers.size());
  for (Transfer t : second.transfers) {
    t.id += offset;
    for (auto& s : t.segments)
      s.via = s.via == kFromSourceShard ? step_of[at(t.sender.value)] : s.via + offset;
    plan.transfers.push_back(std::move(t));
  }
  return plan;
}

}  // namespace refit::planner_detail
