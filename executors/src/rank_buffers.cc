#include "refit/executors/rank_buffers.h"

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {
namespace {

std::string_view memory_name(MemoryKind m) { return m == MemoryKind::kCuda ? "CUDA" : "host"; }

Result<std::vector<lowering::Shard>> check_side(const Plan& plan, const std::vector<ShardBuffer>& side,
                                                std::string_view name) {
  std::vector<lowering::Shard> out;
  for (std::size_t i = 0; i < side.size(); ++i) {
    const ShardBuffer& b = side[i];
    if (b.tensor >= plan.tensors.size())
      return mismatch(fmt::format("{}[{}]: tensor {} is not in the plan ({} tensors)", name, i, b.tensor,
                                  plan.tensors.size()));
    const TensorSpec& t = plan.tensors[b.tensor];
    if (b.box.rank() != t.shape.size() || b.box.extent.size() != b.box.rank() ||
        !Box::whole(t.shape).contains(b.box))
      return mismatch(
          fmt::format("{}[{}]: box {} is not inside tensor '{}'", name, i, b.box.to_string(), t.name));
    const auto need = b.box.volume() * dtype_size(t.dtype);
    if (static_cast<std::int64_t>(b.bytes.size()) < need || (need > 0 && b.bytes.data() == nullptr))
      return mismatch(fmt::format("{}[{}]: the buffer of tensor '{}' holds {} bytes, its box {} needs {}",
                                  name, i, t.name, b.bytes.size(), b.box.to_string(), need));
    out.push_back(lowering::Shard{.tensor = b.tensor, .box = b.box});
  }
  return out;
}

}  // namespace

Result<lowering::RankShards> check_rank_buffers(const Plan& plan, Rank rank, const RankBuffers& buffers,
                                                MemoryKind memory) {
  if (rank.value < 0 || rank.value >= plan.world_size())
    return out_of_range(fmt::format("rank {} is not in the plan's {} ranks", rank.value, plan.world_size()));
  if (buffers.memory != memory)
    return unsupported(fmt::format("rank {}: the buffers are {} memory, this executor moves {} memory",
                                   rank.value, memory_name(buffers.memory), memory_name(memory)));
  return lowering::RankShards{
      .sources =
          REFIT_TRY_IN(check_side(plan, buffers.sources, "sources"), fmt::format("rank {}", rank.value)),
      .destinations = REFIT_TRY_IN(check_side(plan, buffers.destinations, "destinations"),
                                   fmt::format("rank {}", rank.value))};
}

}  // namespace refit
