#include "local_view.h"

#include <algorithm>

#include <fmt/format.h>

namespace refit::nccl_detail {
namespace {

Result<std::vector<std::int32_t>> full_map(const Plan& plan, const CommRankMap& given, CommPosition comm) {
  const auto world = plan.world_size();
  if (given.empty()) {
    if (comm.size != world)
      return invalid(
          fmt::format("the plan has {} ranks and the communicator {}: give a map from plan ranks to "
                      "communicator ranks",
                      world, comm.size));
    std::vector<std::int32_t> identity(static_cast<std::size_t>(world));
    for (std::int32_t r = 0; r < world; ++r) identity[static_cast<std::size_t>(r)] = r;
    return identity;
  }
  if (given.size() != static_cast<std::size_t>(world))
    return invalid(fmt::format("comm_rank_of has {} entries for a plan of {} ranks", given.size(), world));
  for (std::size_t r = 0; r < given.size(); ++r)
    if (given[r] < 0 || given[r] >= comm.size)
      return invalid(
          fmt::format("comm_rank_of[{}] is {}, outside the communicator's {} ranks", r, given[r], comm.size));
  return given;
}

Result<void> add_shards(const Plan& plan, std::span<const ShardBuffer> shards, const char* side,
                        std::vector<LocalShard>& out, LocalView& view) {
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const auto& s = shards[i];
    const auto at = fmt::format("{}[{}]", side, i);
    if (s.tensor >= plan.tensors.size())
      return invalid(fmt::format("{}: tensor index {} does not exist", at, s.tensor));
    const auto& tensor = plan.tensors[s.tensor];
    if (s.box.rank() != tensor.shape.size() || s.box.extent.size() != tensor.shape.size() ||
        !Box::whole(tensor.shape).contains(s.box))
      return invalid(fmt::format("{}: box {} does not fit tensor '{}'", at, s.box.to_string(), tensor.name));
    const auto need = static_cast<std::size_t>(s.box.volume() * dtype_size(tensor.dtype));
    if (s.bytes.size() != need || (need > 0 && s.bytes.data() == nullptr))
      return invalid(fmt::format("{}: tensor '{}' box {} needs {} bytes, the buffer has {}", at, tensor.name,
                                 s.box.to_string(), need, s.bytes.size()));
    if (std::ranges::any_of(out, [&](const LocalShard& o) { return o.tensor == s.tensor; }))
      return invalid(fmt::format("{}: a second buffer for tensor '{}'", at, tensor.name));
    if (need == 0) continue;
    out.push_back(LocalShard{s.tensor, s.box, static_cast<std::int32_t>(view.shards.size())});
    view.shards.push_back(s.bytes);
  }
  return {};
}

Result<void> add_rank(const Plan& plan, const LocalRankBuffers& g, MemoryKind memory, LocalView& view) {
  if (g.buffers.memory != memory)
    return invalid(fmt::format("buffers are in {} memory, this executor moves {} memory",
                               g.buffers.memory == MemoryKind::kCuda ? "CUDA" : "host",
                               memory == MemoryKind::kCuda ? "CUDA" : "host"));
  LocalRank local{g.rank, {}, {}};
  if (auto ok = add_shards(plan, g.buffers.sources, "sources", local.sources, view); !ok) return ok;
  if (auto ok = add_shards(plan, g.buffers.destinations, "destinations", local.destinations, view); !ok)
    return ok;
  view.ranks.push_back(std::move(local));
  return {};
}

}  // namespace

Result<LocalView> make_local_view(const Plan& plan, std::span<const LocalRankBuffers> given,
                                  const CommRankMap& comm_rank_of, CommPosition comm, MemoryKind memory) {
  LocalView view;
  auto map = full_map(plan, comm_rank_of, comm);
  if (!map) return std::unexpected(std::move(map.error()));
  view.comm_rank_of = std::move(*map);
  for (const auto& g : given) {
    const auto r = g.rank.value;
    if (r < 0 || r >= plan.world_size())
      return invalid(fmt::format("rank {} is not in the plan ({} ranks)", r, plan.world_size()));
    if (view.comm_rank_of[static_cast<std::size_t>(r)] != comm.rank)
      return invalid(fmt::format("plan rank {} runs on communicator rank {}, not on this one ({})", r,
                                 view.comm_rank_of[static_cast<std::size_t>(r)], comm.rank));
    if (std::ranges::any_of(view.ranks, [&](const LocalRank& l) { return l.rank == g.rank; }))
      return invalid(fmt::format("rank {} is given twice", r));
    if (auto ok = add_rank(plan, g, memory, view); !ok)
      return std::unexpected(std::move(ok.error()).in(fmt::format("rank {}", r)));
  }
  for (std::int32_t r = 0; r < plan.world_size(); ++r)
    if (view.comm_rank_of[static_cast<std::size_t>(r)] == comm.rank &&
        std::ranges::none_of(view.ranks, [&](const LocalRank& l) { return l.rank.value == r; }))
      return invalid(fmt::format(
          "plan rank {} runs on this communicator rank ({}) but no buffers were given for it", r, comm.rank));
  return view;
}

}  // namespace refit::nccl_detail
