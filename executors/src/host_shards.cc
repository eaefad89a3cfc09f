#include "refit/executors/host_shards.h"

#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/executors/pattern.h"

namespace refit {
namespace {

// The rank's box of a tensor in a layout, if the rank is in its mesh and the box is not empty.
std::optional<Box> box_of(const Layout& layout, Rank rank) {
  if (!layout.mesh().position_of_rank(rank)) return std::nullopt;
  auto box = layout.local_box(rank);
  if (!box || box->empty()) return std::nullopt;
  return *box;
}

}  // namespace

Result<HostShards> HostShards::allocate(const ReshardProblem& problem, Rank rank,
                                        const HostAllocator& allocator) {
  HostShards out;
  const auto& tensors = problem.tensors();
  for (std::uint32_t t = 0; t < tensors.size(); ++t) {
    const auto& spec = tensors[t].tensor;
    const auto element = dtype_size(spec.dtype);
    for (const bool source : {true, false}) {
      const auto box = box_of(source ? tensors[t].source : tensors[t].destination, rank);
      if (!box) continue;
      auto memory = REFIT_TRY_IN(allocator(Bytes{box->volume() * element}),
                                 fmt::format("allocating tensor '{}' on rank {}", spec.name, rank.value));
      const auto span = out.storage_.emplace_back(std::move(memory))->bytes();
      if (source) fill_pattern(t, spec.shape, *box, element, span);
      (source ? out.buffers_.sources : out.buffers_.destinations)
          .push_back(ShardBuffer{.tensor = t, .box = *box, .bytes = span});
    }
  }
  out.clear_destinations();
  return out;
}

HostShards HostShards::allocate(const ReshardProblem& problem, Rank rank) {
  return *allocate(problem, rank, [](Bytes bytes) -> Result<std::unique_ptr<HostAllocation>> {
    return heap_allocation(bytes);
  });
}

void HostShards::clear_destinations() {
  for (const auto& d : buffers_.destinations) std::memset(d.bytes.data(), 0, d.bytes.size());
}

Result<void> HostShards::verify(const ReshardProblem& problem) const {
  for (const auto& d : buffers_.destinations) {
    const auto& spec = problem.tensors()[d.tensor].tensor;
    REFIT_TRY_IN(verify_pattern(d.tensor, spec.shape, d.box, dtype_size(spec.dtype), d.bytes),
                 fmt::format("tensor '{}' box {}", spec.name, d.box.to_string()));
  }
  return {};
}

}  // namespace refit
