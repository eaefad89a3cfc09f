#include "refit/executors/delta_step.h"

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {

Result<void> check_delta_plan(const Plan& plan) {
  for (const auto& t : plan.tensors)
    if (t.quantization && t.quantization->site == QuantSite::kTraining)
      return unsupported(
          fmt::format("tensor '{}': a delta refit of weights trained in fp8 is not written yet", t.name));
  return {};
}

std::int64_t piece_count(const Plan& plan) {
  std::int64_t pieces = 0;
  for (const auto& t : plan.transfers) pieces += static_cast<std::int64_t>(t.segments.size());
  return pieces;
}

Result<DeltaStep> delta_step(const Plan& plan, std::span<const std::int64_t> payloads) {
  if (static_cast<std::int64_t>(payloads.size()) != piece_count(plan))
    return invalid(
        fmt::format("{} payload sizes for a plan of {} pieces", payloads.size(), piece_count(plan)));
  DeltaStep out{.plan = Plan{.strategy = plan.strategy,
                             .execution = plan.execution,
                             .tensors = {},
                             .source_ranks = plan.source_ranks,
                             .destination_ranks = plan.destination_ranks,
                             .transfers = {}},
                .carries = {}};
  std::size_t piece = 0;
  for (const auto& t : plan.transfers) {
    std::int64_t bytes = 0;
    for (std::size_t s = 0; s < t.segments.size(); ++s, ++piece) {
      if (payloads[piece] < 0)
        return invalid(fmt::format("piece {}: payload of {} bytes", piece, payloads[piece]));
      bytes += payloads[piece];
    }
    if (bytes == 0) continue;
    const auto k = static_cast<std::int32_t>(out.plan.tensors.size());
    out.plan.tensors.push_back(TensorSpec{.name = fmt::format("delta payloads of transfer {}", t.id),
                                          .shape = {bytes},
                                          .dtype = DType::kUInt8,
                                          .quantization = std::nullopt});
    out.plan.transfers.push_back(
        Transfer{.id = k,
                 .sender = t.sender,
                 .receiver = t.receiver,
                 .link = t.link,
                 .segments = {Segment{.tensor = static_cast<std::uint32_t>(k), .box = Box::whole({bytes})}},
                 .bytes = Bytes{bytes},
                 .chunk = t.chunk});
    out.carries.push_back(t.id);
  }
  return out;
}

Result<ReshardProblem> delta_step_problem(const DeltaStep& step) {
  std::vector<TensorReshard> tensors;
  for (const auto& t : step.plan.transfers) {
    const auto& spec = step.plan.tensors[t.segments.front().tensor];
    const auto whole = [&](Rank r) -> Result<Layout> {
      return Layout::make(spec.shape, REFIT_TRY(Mesh::make({1}, {r})), {Placement::replicate()});
    };
    tensors.push_back(TensorReshard{
        .tensor = spec, .source = REFIT_TRY(whole(t.sender)), .destination = REFIT_TRY(whole(t.receiver))});
  }
  return ReshardProblem::make(std::move(tensors), step.plan.source_ranks, step.plan.destination_ranks);
}

}  // namespace refit
