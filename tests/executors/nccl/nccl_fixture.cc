#include "nccl_fixture.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "member_program.h"
#include "quantized_sources.h"
#include "refit/core/try.h"
#include "refit/executors/pattern.h"
#include "translate.h"

namespace refit::nccl_detail::testing {
namespace {

std::span<std::byte> add_shard(HostRanks& h, std::uint32_t tensor, const TensorSpec& spec, const Box& box,
                               bool source) {
  auto& bytes =
      h.memory.emplace_back(static_cast<std::size_t>(box.volume() * dtype_size(spec.dtype)), std::byte{0xEE});
  if (source) fill_pattern(tensor, spec.shape, box, dtype_size(spec.dtype), bytes);
  return bytes;
}

}  // namespace

HostRanks make_host_ranks(const ReshardProblem& problem) {
  HostRanks h;
  for (std::int32_t r = 0; r < problem.world_size(); ++r) {
    LocalRankBuffers rank{
        .rank = Rank{r},
        .buffers = RankBuffers{.memory = MemoryKind::kHost, .sources = {}, .destinations = {}}};
    for (std::uint32_t t = 0; t < problem.tensors().size(); ++t) {
      const auto& spec = problem.tensors()[t];
      if (auto box = spec.source.local_box(Rank{r}))
        rank.buffers.sources.push_back(
            ShardBuffer{.tensor = t, .box = *box, .bytes = add_shard(h, t, spec.tensor, *box, true)});
      if (auto box = spec.destination.local_box(Rank{r}))
        rank.buffers.destinations.push_back(
            ShardBuffer{.tensor = t, .box = *box, .bytes = add_shard(h, t, spec.tensor, *box, false)});
    }
    h.ranks.push_back(std::move(rank));
  }
  return h;
}

Result<void> verify_destinations(const ReshardProblem& problem, const HostRanks& ranks) {
  for (const auto& r : ranks.ranks)
    for (const auto& d : r.buffers.destinations) {
      const auto& spec = problem.tensors()[d.tensor].tensor;
      REFIT_TRY_IN(verify_pattern(d.tensor, spec.shape, d.box, dtype_size(spec.dtype), d.bytes),
                   fmt::format("rank {}, tensor '{}' {}", r.rank.value, spec.name, d.box.to_string()));
    }
  return {};
}

CommRankMap comm_map(Mapping m, std::int32_t world) {
  CommRankMap map(static_cast<std::size_t>(world));
  for (std::int32_t r = 0; r < world; ++r)
    map[static_cast<std::size_t>(r)] = m == Mapping::kOnePerProcess ? r : m == Mapping::kAllInOne ? 0 : r / 2;
  return map;
}

std::vector<SimProcess> Processes::sim() const {
  std::vector<SimProcess> out;
  for (std::size_t c = 0; c < programs.size(); ++c)
    out.push_back(SimProcess{
        .program = &programs[c], .shards = views[c].shards, .comm_rank = static_cast<std::int32_t>(c)});
  return out;
}

namespace {

// A process's program from its view and quantize ops.
using ProgramOf = std::function<Result<Program>(const LocalView&, std::span<const QuantizedBox>)>;

Result<Processes> processes_of(const Plan& plan, HostRanks& ranks, const CommRankMap& map,
                               const ProgramOf& program_of) {
  const auto size = *std::ranges::max_element(map) + 1;
  Processes p;
  for (std::int32_t c = 0; c < size; ++c) {
    std::vector<LocalRankBuffers> mine;
    for (const auto& r : ranks.ranks)
      if (map[static_cast<std::size_t>(r.rank.value)] == c) mine.push_back(r);
    const auto allocate = [&](Bytes bytes, std::string_view) -> Result<std::span<std::byte>> {
      return *p.quantized.emplace_back(
          std::make_unique<std::vector<std::byte>>(static_cast<std::size_t>(bytes.value), std::byte{0xEE}));
    };
    const auto quantized = REFIT_TRY(QuantizedSources::make(plan, mine, allocate));
    auto view =
        REFIT_TRY(make_local_view(plan, quantized.ranks(), map, CommPosition{c, size}, MemoryKind::kHost));
    const auto quantize = quantized.add_to(view);
    auto program = REFIT_TRY(program_of(view, quantize));
    p.views.push_back(std::move(view));
    p.programs.push_back(std::move(program));
  }
  return p;
}

}  // namespace

Result<Processes> make_processes(const Plan& plan, HostRanks& ranks, const CommRankMap& map, Bytes staging) {
  const auto lowered = REFIT_TRY(lowering::LoweredPlan::make(plan, staging));
  return processes_of(plan, ranks, map, [&](const LocalView& view, std::span<const QuantizedBox> quantize) {
    return build_program(lowered, view, quantize);
  });
}

Result<Processes> make_member_processes(const Plan& full, const EngineMembership& m, HostRanks& ranks,
                                        const CommRankMap& map, Bytes staging) {
  const std::vector<bool> none_gone(static_cast<std::size_t>(full.world_size()), false);
  return processes_of(full, ranks, map,
                      [&](const LocalView& view, std::span<const QuantizedBox> quantize) -> Result<Program> {
                        auto made =
                            REFIT_TRY(member_program(full, m, none_gone, view, map, quantize, staging));
                        return std::move(made.program);
                      });
}

}  // namespace refit::nccl_detail::testing
