#include "refit/models/rank_bytes.h"

namespace refit::models {
namespace {

void add_layout(const Layout& layout, std::int64_t element_size, std::int32_t first_rank,
                std::vector<Bytes>& out) {
  for (std::int64_t p = 0; p < layout.mesh().size(); ++p) {
    const auto r = layout.mesh().rank_at(p).value - first_rank;
    out[static_cast<std::size_t>(r)] += Bytes{layout.box_at_position(p).volume() * element_size};
  }
}

}  // namespace

RankBytes rank_bytes(const ReshardProblem& problem) {
  RankBytes out{.source = std::vector<Bytes>(static_cast<std::size_t>(problem.source_ranks())),
                .destination = std::vector<Bytes>(static_cast<std::size_t>(problem.destination_ranks()))};
  for (const auto& t : problem.tensors()) {
    // What each side holds: a training rank keeps a weight quantized at the senders in bf16 and
    // none of its scales (FP8 in flight).
    if (held_at_source(t.tensor)) add_layout(t.source, dtype_size(held_dtype(t.tensor, true)), 0, out.source);
    add_layout(t.destination, dtype_size(t.tensor.dtype), problem.source_ranks(), out.destination);
  }
  return out;
}

}  // namespace refit::models
