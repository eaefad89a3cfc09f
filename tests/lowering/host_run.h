#pragma once
// Runs a whole plan through the lowered programs of all its ranks on host memory, transfer by
// transfer in plan order: each chunk read where its sender's program says (in place, or packed
// through host_copy), written where its receiver's program says; a quantize step run by the CPU
// quantizer as the UCX executor runs it. The destinations must then hold
// the verification pattern: the lowering's locations, scratch and relays are right whatever a
// transport adds.
#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/executors/host_shards.h"
#include "refit/executors/quantize_step.h"
#include "refit/lowering/host_copy.h"
#include "refit/lowering/rank_program.h"

namespace refit::lowering::testing {

inline RankShards shards_of(const RankBuffers& b) {
  RankShards out;
  for (const auto& s : b.sources) out.sources.push_back(Shard{.tensor = s.tensor, .box = s.box});
  for (const auto& s : b.destinations) out.destinations.push_back(Shard{.tensor = s.tensor, .box = s.box});
  return out;
}

struct HostRank {
  HostShards shards;
  std::vector<std::byte> scratch;
  std::vector<std::byte*> sources;
  std::vector<std::byte*> destinations;
  HostBuffers buffers() {
    return HostBuffers{.sources = sources, .destinations = destinations, .scratch = scratch.data()};
  }
};

inline std::byte* at(const HostBuffers& b, const Run& r) { return b.base(r.kind, r.index) + r.offset; }

// Moves chunk k of transfer t from its sender's buffers to its receiver's.
[[nodiscard]] inline Result<void> move_chunk(const RankProgram& from, const Send& s, const HostBuffers& fb,
                                             const RankProgram& to, const Receive& r, const HostBuffers& tb,
                                             std::int64_t k) {
  const auto bytes = from.lowered().layout(s.transfer).chunk_bytes(k);
  std::vector<std::byte> wire(static_cast<std::size_t>(bytes));
  if (s.chunks[static_cast<std::size_t>(k)].path == CopyPath::kInPlace) {
    for (const Run& run : from.runs(s, k))
      std::memcpy(wire.data() + run.stream, at(fb, run), static_cast<std::size_t>(run.length));
  } else {
    REFIT_TRY(pack_chunk(from, s, k, fb, wire.data()));
  }
  if (r.chunks[static_cast<std::size_t>(k)].path == CopyPath::kInPlace) {
    for (const Run& run : to.runs(r, k))
      std::memcpy(at(tb, run), wire.data() + run.stream, static_cast<std::size_t>(run.length));
    unpack_chunk(to, r, k, tb, nullptr);
  } else {
    unpack_chunk(to, r, k, tb, wire.data());
  }
  return {};
}

// Lowers every rank of `plan` and runs it; returns the first error (lowering or verification).
[[nodiscard]] inline Result<void> run_on_host(const Plan& plan, const ReshardProblem& problem, Bytes staging,
                                              const ZeroCopyRule& rule) {
  const auto lowered = REFIT_TRY(LoweredPlan::make(plan, staging));
  std::vector<RankProgram> programs;
  std::vector<HostRank> ranks;
  for (std::int32_t r = 0; r < plan.world_size(); ++r) {
    auto shards = HostShards::allocate(problem, Rank{r});
    programs.push_back(REFIT_TRY(lower_rank(lowered, Rank{r}, shards_of(shards.buffers()), rule)));
    HostRank h{.shards = std::move(shards),
               .scratch = std::vector<std::byte>(static_cast<std::size_t>(programs.back().scratch().value)),
               .sources = {},
               .destinations = {}};
    for (auto& b : h.shards.buffers().sources) h.sources.push_back(b.bytes.data());
    for (auto& b : h.shards.buffers().destinations) h.destinations.push_back(b.bytes.data());
    ranks.push_back(std::move(h));
  }
  for (const Transfer& t : plan.transfers) {
    if (t.quantizes()) {  // in plan order, so what it quantizes has landed
      const auto& program = programs[static_cast<std::size_t>(t.sender.value)];
      run_quantize_step(program, *std::ranges::find(program.quantize_steps(), t.id, &QuantizeStep::transfer),
                        ranks[static_cast<std::size_t>(t.sender.value)].buffers());
      continue;
    }
    const auto& from = programs[static_cast<std::size_t>(t.sender.value)];
    const auto& to = programs[static_cast<std::size_t>(t.receiver.value)];
    const Send& s = *std::ranges::find(from.sends(), t.id, &Send::transfer);
    const Receive& r = *std::ranges::find(to.receives(), t.id, &Receive::transfer);
    for (std::int64_t k = 0; k < lowered.layout(t.id).chunks(); ++k)
      REFIT_TRY(move_chunk(from, s, ranks[static_cast<std::size_t>(t.sender.value)].buffers(), to, r,
                           ranks[static_cast<std::size_t>(t.receiver.value)].buffers(), k));
  }
  for (std::size_t r = 0; r < ranks.size(); ++r)
    REFIT_TRY_IN(ranks[r].shards.verify(problem), fmt::format("rank {}", r));
  return {};
}

}  // namespace refit::lowering::testing
