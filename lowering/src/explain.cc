#include "refit/lowering/explain.h"

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/lowering/lowered_plan.h"

namespace refit::lowering {
namespace {

void count(SideSummary& side, const std::vector<ChunkCopy>& chunks) {
  ++side.transfers;
  for (const auto& c : chunks) {
    ++side.chunks;
    side.bytes += Bytes{c.bytes};
    ++side.by_reason[static_cast<std::size_t>(c.why)];
    if (c.path == CopyPath::kInPlace) {
      ++side.in_place;
      side.runs += c.runs;
    } else {
      ++side.staged;
      side.staged_bytes += Bytes{c.bytes};
    }
  }
}

void describe(std::string& out, std::string_view name, const SideSummary& s) {
  fmt::format_to(std::back_inserter(out),
                 "{:<9} {} transfers, {} chunks, {} bytes: {} in place ({} runs), {} staged ({} bytes)\n",
                 name, s.transfers, s.chunks, s.bytes.value, s.in_place, s.runs, s.staged,
                 s.staged_bytes.value);
  for (std::size_t r = 0; r < s.by_reason.size(); ++r)
    if (s.by_reason[r] > 0)
      fmt::format_to(std::back_inserter(out), "            {:>8} chunks: {}\n", s.by_reason[r],
                     copy_reason_text(static_cast<CopyReason>(r)));
}

}  // namespace

ProgramSummary summarize(const RankProgram& program) {
  ProgramSummary out{.rank = program.rank()};
  for (const auto& s : program.sends()) {
    count(out.sends, s.chunks);
    for (const auto& w : s.waits) out.waiting_chunks += w.empty() ? 0 : 1;
  }
  for (const auto& r : program.receives()) {
    count(out.receives, r.chunks);
    out.extract_transfers += r.extracts ? 1 : 0;
  }
  for (const auto& step : program.quantize_steps()) {
    ++out.quantize_steps;
    for (const auto& b : step.blocks) out.quantized_elements += b.blocks.volume();
  }
  out.scratch = program.scratch();
  out.send_staging = program.send_staging();
  out.receive_staging = program.receive_staging();
  return out;
}

std::string explain(const RankProgram& program, const ExecutionModel& model) {
  const auto s = summarize(program);
  const auto& rule = program.zero_copy();
  std::string out = fmt::format("rank {} as {} runs it: {}\n", s.rank.value, model.name, model.description);
  fmt::format_to(
      std::back_inserter(out),
      "chunks    each transfer's chunk size, at most {} bytes (half the staging of {} bytes), cut on "
      "element boundaries\n",
      program.lowered().staging().value / 2, program.lowered().staging().value);
  if (rule.max_runs == 1 && rule.min_mean_run.value == ZeroCopyRule{}.min_mean_run.value)
    out += "in place  a chunk that is one contiguous run of one buffer\n";
  else
    fmt::format_to(std::back_inserter(out),
                   "in place  a chunk of at most {} runs, or of runs of {} bytes or more on average\n",
                   rule.max_runs, rule.min_mean_run.value);
  describe(out, "sends", s.sends);
  describe(out, "receives", s.receives);
  fmt::format_to(std::back_inserter(out),
                 "relays    {} sent chunks wait for received data; {} received transfers are partly copied "
                 "into this rank's boxes\n",
                 s.waiting_chunks, s.extract_transfers);
  if (s.quantize_steps > 0)
    fmt::format_to(
        std::back_inserter(out),
        "quantize  {} steps make {} fp8 values (and their scales) of weights landing here, once their "
        "bf16 copies have landed\n",
        s.quantize_steps, s.quantized_elements);
  fmt::format_to(std::back_inserter(out), "scratch   {} bytes (forwarded data outside this rank's boxes)\n",
                 s.scratch.value);
  fmt::format_to(std::back_inserter(out),
                 "staging   packing {} chunks (largest {} bytes); unpacking {} chunks (largest {} bytes)\n",
                 s.send_staging.chunks, s.send_staging.largest.value, s.receive_staging.chunks,
                 s.receive_staging.largest.value);
  return out;
}

Result<PlanLowering> explain_plan(const Plan& plan, const ReshardProblem& problem,
                                  std::optional<std::int32_t> rank) {
  // Counting needs no lowering: plans that describe more chunks than the lowering materialises
  // (NeMo RL's gather-broadcast of a large model) still get their message count.
  if (!rank) return PlanLowering{.messages = LoweredPlan::count_chunks(plan, kDefaultStaging)};
  const auto lowered = REFIT_TRY(LoweredPlan::make(plan, kDefaultStaging));
  PlanLowering out{.messages = lowered.chunks()};
  if (*rank < 0 || *rank >= plan.world_size())
    return out_of_range(
        fmt::format("--explain: rank {} is not in the plan's {} ranks", *rank, plan.world_size()));
  const auto& model = execution_model(plan.execution);
  const auto program =
      REFIT_TRY(lower_rank(lowered, Rank{*rank}, shards_of(problem, Rank{*rank}), model.zero_copy));
  out.summary = summarize(program);
  out.text = explain(program, model);
  return out;
}

}  // namespace refit::lowering
