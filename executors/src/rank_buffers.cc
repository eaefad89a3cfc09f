#include "refit/executors/rank_buffers.h"

#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "refit/core/checked.h"
#include "refit/core/try.h"

namespace refit {
namespace {

std::string_view memory_name(MemoryKind m) { return m == MemoryKind::kCuda ? "CUDA" : "host"; }

// One past the last byte a strided region touches in its parameter; nullopt where its strides do
// not lay it out (strided_end) or the bytes pass 2^63.
std::optional<std::int64_t> region_end(const lowering::Region& r, std::int64_t element_size) {
  if (r.box.empty()) return r.offset;
  const auto elements = strided_end(0, r.box.extent, r.strides);
  const auto bytes = elements ? checked_mul(*elements, element_size) : std::nullopt;
  return bytes ? checked_add(r.offset, *bytes) : std::nullopt;
}

// Every region of `b` inside the parameter it names (the lowering checks that they tile the box).
Result<void> check_regions(const ShardBuffer& b, const TensorSpec& t,
                           const std::vector<std::span<std::byte>>& parameters) {
  for (std::size_t j = 0; j < b.regions.size(); ++j) {
    const auto& r = b.regions[j];
    if (r.buffer < 0 || static_cast<std::size_t>(r.buffer) >= parameters.size())
      return mismatch(fmt::format("region {} of tensor '{}' names parameter {}, the side has {}", j, t.name,
                                  r.buffer, parameters.size()));
    const auto size = static_cast<std::int64_t>(parameters[static_cast<std::size_t>(r.buffer)].size());
    const auto end = region_end(r, dtype_size(t.dtype));
    if (r.offset < 0 || !end)
      return mismatch(
          fmt::format("region {} ({}) of tensor '{}': offset {} and strides [{}] do not lay it out "
                      "in parameter {} (negative, zero where the box has several elements, or past "
                      "2^63 bytes)",
                      j, r.box.to_string(), t.name, r.offset, fmt::join(r.strides, ", "), r.buffer));
    if (*end > size)
      return mismatch(
          fmt::format("region {} ({}) of tensor '{}' reaches byte {} of parameter {}, which holds {}", j,
                      r.box.to_string(), t.name, *end, r.buffer, size));
  }
  return {};
}

Result<std::vector<lowering::Shard>> check_side(const Plan& plan, const std::vector<ShardBuffer>& side,
                                                const std::vector<std::span<std::byte>>& parameters,
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
    if (parameters.empty() != b.regions.empty())
      return mismatch(fmt::format("{}[{}]: tensor '{}' has {} regions but the side passes {} parameters",
                                  name, i, t.name, b.regions.size(), parameters.size()));
    REFIT_TRY_IN(check_regions(b, t, parameters), fmt::format("{}[{}]", name, i));
    const auto need = b.regions.empty() ? b.box.volume() * dtype_size(t.dtype) : 0;
    if (static_cast<std::int64_t>(b.bytes.size()) < need || (need > 0 && b.bytes.data() == nullptr))
      return mismatch(fmt::format("{}[{}]: the buffer of tensor '{}' holds {} bytes, its box {} needs {}",
                                  name, i, t.name, b.bytes.size(), b.box.to_string(), need));
    out.push_back(lowering::Shard{.tensor = b.tensor, .box = b.box, .regions = b.regions});
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
      .sources = REFIT_TRY_IN(check_side(plan, buffers.sources, buffers.source_parameters, "sources"),
                              fmt::format("rank {}", rank.value)),
      .destinations =
          REFIT_TRY_IN(check_side(plan, buffers.destinations, buffers.destination_parameters, "destinations"),
                       fmt::format("rank {}", rank.value))};
}

std::vector<std::span<std::byte>> side_buffers(const RankBuffers& buffers, bool source) {
  const auto& parameters = source ? buffers.source_parameters : buffers.destination_parameters;
  if (!parameters.empty()) return parameters;
  std::vector<std::span<std::byte>> out;
  for (const auto& b : source ? buffers.sources : buffers.destinations) out.push_back(b.bytes);
  return out;
}

}  // namespace refit
