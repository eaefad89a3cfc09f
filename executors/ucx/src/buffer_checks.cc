#include "buffer_checks.h"

#include <fmt/format.h>

namespace refit::ucx_detail {
namespace {

Result<void> check_side(const Plan& plan, const std::vector<ShardBuffer>& shards, std::string_view side) {
  std::vector<bool> seen(plan.tensors.size(), false);
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const ShardBuffer& b = shards[i];
    if (b.tensor >= plan.tensors.size())
      return invalid(fmt::format("{} buffer {} names tensor {}, the plan has {}", side, i, b.tensor,
                                 plan.tensors.size()));
    const TensorSpec& t = plan.tensors[b.tensor];
    if (seen[b.tensor]) return invalid(fmt::format("tensor '{}' has two {} buffers", t.name, side));
    seen[b.tensor] = true;
    if (b.box.rank() != t.shape.size() || !Box::whole(t.shape).contains(b.box))
      return invalid(fmt::format("{} buffer of tensor '{}': box {} is not inside the tensor's shape", side,
                                 t.name, b.box.to_string()));
    const auto need = b.box.volume() * dtype_size(t.dtype);
    if (static_cast<std::int64_t>(b.bytes.size()) < need)
      return invalid(fmt::format("{} buffer of tensor '{}' holds {} bytes, its box {} needs {}", side, t.name,
                                 b.bytes.size(), b.box.to_string(), need));
  }
  return {};
}

}  // namespace

Result<void> check_buffers(const Plan& plan, Rank rank, const RankBuffers& buffers) {
  if (rank.value < 0 || rank.value >= plan.world_size())
    return invalid(fmt::format("rank {} is not in the plan's {} ranks", rank.value, plan.world_size()));
  if (buffers.memory != MemoryKind::kHost) return invalid("the ucx executor moves host memory only");
  if (auto ok = check_side(plan, buffers.sources, "source"); !ok) return ok;
  return check_side(plan, buffers.destinations, "destination");
}

std::optional<std::size_t> buffer_of(const std::vector<ShardBuffer>& shards, std::uint32_t tensor) {
  for (std::size_t i = 0; i < shards.size(); ++i)
    if (shards[i].tensor == tensor) return i;
  return std::nullopt;
}

}  // namespace refit::ucx_detail
