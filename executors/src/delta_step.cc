#include "refit/executors/delta_step.h"

#include <map>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {

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

RankBuffers delta_step_buffers(const DeltaStep& step, Rank rank, MemoryKind memory,
                               const std::function<std::byte*(std::int32_t)>& payloads) {
  RankBuffers out{.memory = memory};
  for (std::size_t k = 0; k < step.plan.transfers.size(); ++k) {
    const auto& t = step.plan.transfers[k];
    if (t.sender != rank && t.receiver != rank) continue;
    const auto& segment = t.segments.front();
    const ShardBuffer buffer{
        .tensor = segment.tensor,
        .box = segment.box,
        .bytes = std::span(payloads(step.carries[k]), static_cast<std::size_t>(t.bytes.value)),
        .regions = {}};
    (t.sender == rank ? out.sources : out.destinations).push_back(buffer);
  }
  return out;
}

namespace {

// The job's ranks, and after its training ranks one for each relay that sends in `plan`.
class StepRanks {
 public:
  StepRanks(const Plan& plan, const RankMap& ranks) : training_(plan.source_ranks) {
    for (const auto& t : plan.transfers)
      if (t.sender.value >= training_) relays_.try_emplace(t.sender.value, 0);
    gpus_.assign(ranks.gpus().begin(), ranks.gpus().begin() + training_);
    for (auto& [relay, rank] : relays_) {
      rank = static_cast<std::int32_t>(gpus_.size());
      gpus_.push_back(ranks.gpu_of(Rank{relay}));
    }
    gpus_.insert(gpus_.end(), ranks.gpus().begin() + training_, ranks.gpus().end());
  }

  std::int32_t senders() const { return training_ + static_cast<std::int32_t>(relays_.size()); }
  Rank sender(Rank r) const { return r.value < training_ ? r : Rank{relays_.at(r.value)}; }
  Rank receiver(Rank r) const { return Rank{r.value + static_cast<std::int32_t>(relays_.size())}; }
  const std::vector<GpuId>& gpus() const { return gpus_; }

 private:
  std::int32_t training_;
  std::map<std::int32_t, std::int32_t> relays_;  // the relay's rank in the job -> in the step
  std::vector<GpuId> gpus_;                      // by rank of the step
};

}  // namespace

Result<StepJob> delta_step_job(const DeltaStep& step, const PlacedCluster& cluster) {
  const StepRanks ranks(step.plan, cluster.ranks());
  Plan plan = step.plan;
  plan.source_ranks = ranks.senders();
  std::vector<TensorReshard> tensors;
  for (auto& t : plan.transfers) {
    t.sender = ranks.sender(t.sender);
    t.receiver = ranks.receiver(t.receiver);
    const auto& spec = plan.tensors[t.segments.front().tensor];
    const auto whole = [&](Rank r) -> Result<Layout> {
      return Layout::make(spec.shape, REFIT_TRY(Mesh::make({1}, {r})), {Placement::replicate()});
    };
    tensors.push_back(TensorReshard{
        .tensor = spec, .source = REFIT_TRY(whole(t.sender)), .destination = REFIT_TRY(whole(t.receiver))});
  }
  auto problem =
      REFIT_TRY(ReshardProblem::make(std::move(tensors), plan.source_ranks, plan.destination_ranks));
  auto placed = REFIT_TRY(PlacedCluster::make(
      cluster.cluster(), REFIT_TRY(RankMap::make(cluster.cluster(), ranks.gpus(), plan.source_ranks))));
  return StepJob{.plan = std::move(plan), .problem = std::move(problem), .cluster = std::move(placed)};
}

}  // namespace refit
