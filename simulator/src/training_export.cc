#include "training_export.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "refit/core/index.h"

namespace refit::sim {
namespace {

struct DisjointSets {
  std::vector<std::int32_t> parent;
  explicit DisjointSets(std::int32_t n) : parent(at(n)) { std::iota(parent.begin(), parent.end(), 0); }
  std::int32_t find(std::int32_t x) {
    while (parent[at(x)] != x) x = parent[at(x)] = parent[at(parent[at(x)])];
    return x;
  }
  void join(std::int32_t a, std::int32_t b) { parent[at(find(a))] = find(b); }
};

Bytes box_bytes(const Box& b, DType dtype) { return Bytes{b.volume() * dtype_size(dtype)}; }

// The rank of rank 0's stage at the place `r` has in its own stage.
Rank in_first_stage(Rank r, const TrainingStages& s, std::int32_t stage) {
  return Rank{r.value - s.ranks[at(stage)].front().value + s.ranks.front().front().value};
}

std::vector<Rank> pipeline_ring(Rank owner, std::int32_t stage, const TrainingStages& s) {
  if (s.ranks.size() < 2) return {};
  const auto index = owner.value - s.ranks[at(stage)].front().value;
  std::vector<Rank> ring;
  for (std::size_t k = 0; k < s.ranks.size(); ++k)
    ring.push_back(s.ranks[(at(stage) + k) % s.ranks.size()][at(index)]);
  return ring;
}

// Along each sharded axis of size > 1, last axis (tensor parallel) first: the ranks through
// mesh position 0 on that axis, moved to rank 0's stage.
std::vector<GatherStep> gather_steps(const Layout& source, Bytes local, std::int32_t stage,
                                     const TrainingStages& s) {
  const Mesh& mesh = source.mesh();
  std::vector<GatherStep> steps;
  Bytes gathered = local;
  for (std::size_t a = mesh.ndim(); a-- > 0;) {
    if (!source.placements()[a].is_shard() || mesh.shape()[a] < 2) continue;
    GatherStep step;
    std::vector<std::int64_t> coord(mesh.ndim(), 0);
    for (std::int64_t i = 0; i < mesh.shape()[a]; ++i) {
      coord[a] = i;
      step.ring.push_back(in_first_stage(mesh.rank_at(mesh.position_of_coord(coord)), s, stage));
    }
    gathered = gathered * mesh.shape()[a];
    step.gathered = gathered;
    steps.push_back(std::move(step));
  }
  return steps;
}

}  // namespace

Result<TrainingStages> find_stages(const ReshardProblem& problem) {
  DisjointSets sets(problem.source_ranks());
  for (const auto& t : problem.tensors()) {
    const auto& ranks = t.source.mesh().ranks();
    for (const Rank r : ranks) sets.join(r.value, ranks.front().value);
  }
  TrainingStages out;
  std::vector<std::int32_t> stage_of_root(at(problem.source_ranks()), -1);
  for (std::int32_t r = 0; r < problem.source_ranks(); ++r) {
    auto& stage = stage_of_root[at(sets.find(r))];
    if (stage < 0) {
      stage = static_cast<std::int32_t>(out.ranks.size());
      out.ranks.emplace_back();
    }
    out.ranks[at(stage)].push_back(Rank{r});
  }
  for (const auto& stage : out.ranks)
    if (stage.size() != out.ranks.front().size())
      return unsupported(fmt::format("training stages differ in size: ranks {}.. hold {}, ranks {}.. hold {}",
                                     out.ranks.front().front().value, out.ranks.front().size(),
                                     stage.front().value, stage.size()));
  for (const auto& t : problem.tensors())
    out.stage_of_tensor.push_back(stage_of_root[at(sets.find(t.source.mesh().ranks().front().value))]);
  return out;
}

std::vector<ExportTask> export_tasks(const ReshardProblem& problem, const TrainingStages& stages,
                                     const std::vector<std::int32_t>& tensors) {
  std::vector<ExportTask> out;
  for (const std::int32_t i : tensors) {
    const auto& t = problem.tensors()[at(i)];
    const auto stage = stages.stage_of_tensor[at(i)];
    const Box owned = t.source.box_at_position(0);
    const bool stacked = t.tensor.shape.size() >= 3;
    const std::int64_t count = stacked ? std::max<std::int64_t>(1, owned.extent[0]) : 1;
    const Bytes local{box_bytes(owned, t.tensor.dtype).value / count};
    ExportTask task{.tensor = i,
                    .full = Bytes{t.tensor.bytes().value / count},
                    .hf_tensors = stacked ? t.tensor.shape[0] / count : 1,
                    .local = local,
                    .pipeline = pipeline_ring(t.source.mesh().rank_at(0), stage, stages),
                    .gathers = gather_steps(t.source, local, stage, stages)};
    for (std::int64_t k = 0; k < count; ++k) out.push_back(task);
  }
  return out;
}

}  // namespace refit::sim
