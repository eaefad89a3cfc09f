#include "refit/lowering/step_schedule.h"

#include <algorithm>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::lowering {
namespace {

// Staging and chunks used per rank and step, filled first-fit.
class Occupancy {
 public:
  Occupancy(std::int32_t ranks, std::int64_t half, std::int32_t chunks_per_step)
      : half_(half),
        chunks_per_step_(chunks_per_step),
        used_(static_cast<std::size_t>(ranks)),
        count_(used_.size()),
        open_(used_.size(), 0) {}

  // The first step >= `ready` where both ranks have room for `bytes`; takes it.
  std::int32_t place(Rank a, Rank b, std::int32_t ready, std::int64_t bytes) {
    std::int32_t s = std::max({ready, open(a), open(b)});
    while (!fits(a, s, bytes) || !fits(b, s, bytes)) ++s;
    take(a, s, bytes);
    take(b, s, bytes);
    return s;
  }

 private:
  std::int32_t open(Rank r) const { return open_[static_cast<std::size_t>(r.value)]; }
  bool fits(Rank r, std::int32_t s, std::int64_t bytes) const {
    const auto& used = used_[static_cast<std::size_t>(r.value)];
    const auto& count = count_[static_cast<std::size_t>(r.value)];
    const auto i = static_cast<std::size_t>(s);
    return i >= used.size() || (used[i] + bytes <= half_ && count[i] < chunks_per_step_);
  }
  void take(Rank r, std::int32_t s, std::int64_t bytes) {
    const auto k = static_cast<std::size_t>(r.value);
    auto& used = used_[k];
    auto& count = count_[k];
    if (used.size() <= static_cast<std::size_t>(s)) {
      used.resize(static_cast<std::size_t>(s) + 1, 0);
      count.resize(used.size(), 0);
    }
    used[static_cast<std::size_t>(s)] += bytes;
    ++count[static_cast<std::size_t>(s)];
    // Steps before open_ cannot take even the smallest chunk.
    while (static_cast<std::size_t>(open_[k]) < used.size() && !fits(r, open_[k], kAlign)) ++open_[k];
  }

  std::int64_t half_;
  std::int32_t chunks_per_step_;
  std::vector<std::vector<std::int64_t>> used_;
  std::vector<std::vector<std::int32_t>> count_;
  std::vector<std::int32_t> open_;
};

// The latest step among the upstream chunks that chunk `k` of `t` waits for (steps rise with
// chunks, so the last chunk of each wait suffices).
[[nodiscard]] Result<std::int32_t> upstream_step(const LoweredPlan& lowered, const StepSchedule& s,
                                                 const Transfer& t, std::int64_t k) {
  std::int32_t latest = kNoUpstream;
  for (const auto& w : REFIT_TRY(lowered.waits(t.id, k)))
    latest = std::max(latest,
                      s.step[static_cast<std::size_t>(w.transfer)][static_cast<std::size_t>(w.chunks - 1)]);
  return latest;
}

}  // namespace

Result<StepSchedule> make_step_schedule(const LoweredPlan& lowered, std::int32_t chunks_per_step) {
  if (chunks_per_step < 1)
    return out_of_range(fmt::format("chunks per step must be at least 1, got {}", chunks_per_step));
  const Plan& plan = lowered.plan();
  StepSchedule s;
  s.half = lowered.staging().value / 2 / kAlign * kAlign;
  Occupancy occupancy(plan.world_size(), s.half, chunks_per_step);
  for (const auto& t : plan.transfers) {
    const auto& layout = lowered.layout(t.id);
    auto& steps = s.step.emplace_back();
    auto& upstream = s.upstream.emplace_back();
    for (std::int64_t k = 0; k < layout.chunks(); ++k) {
      const auto latest = REFIT_TRY_IN(upstream_step(lowered, s, t, k), fmt::format("transfers[{}]", t.id));
      const std::int32_t ready = std::max(latest + 1, k ? steps.back() : 0);
      // A quantize step moves nothing: it runs in the step after all it quantizes has landed.
      steps.push_back(t.quantizes()
                          ? ready
                          : occupancy.place(t.sender, t.receiver, ready, align_up(layout.chunk_bytes(k))));
      upstream.push_back(latest);
      s.steps = std::max(s.steps, steps.back() + 1);
    }
  }
  return s;
}

}  // namespace refit::lowering
