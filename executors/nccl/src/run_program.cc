#include "run_program.h"

#include <algorithm>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "refit/core/elapsed.h"
#include "refit/core/try.h"
#include "refit/executors/interrupt_check.h"

namespace refit::nccl_detail {
namespace {

// "receives from rank 3 (transfer 7, chunk 2), sends to rank 9 (transfer 8, chunk 0)".
std::string traffic_of(const Program& p, std::size_t block) {
  constexpr int kShown = 6;
  const std::size_t end = block + 1 < p.blocks.size() ? p.blocks[block + 1].first_op : p.ops.size();
  std::string out;
  int listed = 0;
  int more = 0;
  for (std::size_t i = p.blocks[block].first_op; i < end; ++i) {
    const auto* op = std::get_if<P2p>(&p.ops[i]);
    if (op == nullptr) continue;
    if (listed == kShown) {
      ++more;
      continue;
    }
    out += fmt::format("{}rank {} {} rank {} (transfer {}, chunk {}, {} bytes)", listed ? ", " : "",
                       op->self.value, op->direction == Direction::kSend ? "sends to" : "receives from",
                       op->peer.value, op->transfer, op->chunk, op->bytes);
    ++listed;
  }
  if (more > 0) out += fmt::format(" and {} more", more);
  return out;
}

class Runner {
 public:
  Runner(const Program& program, Backend& backend, const RunOptions& options)
      : program_(program),
        backend_(backend),
        options_(options),
        budget_(to_duration(options.timeout)),
        interrupt_(options.interrupted) {}

  // Any failure aborts the backend once, before its error returns.
  [[nodiscard]] Result<void> run() {
    auto ran = issue_all();
    if (!ran) backend_.abort();
    return ran;
  }

 private:
  [[nodiscard]] Result<void> issue_all() {
    std::size_t next = 0;  // the next block to start
    const auto window = static_cast<std::size_t>(std::max(options_.window, 1));
    for (std::size_t i = 0; i < program_.ops.size(); ++i) {
      if (next < program_.blocks.size() && program_.blocks[next].first_op == i) {
        if (next >= window) REFIT_TRY(wait_for_block(next - window));
        ++next;
      }
      REFIT_TRY_IN(backend_.issue(program_.ops[i], Clock::now() + budget_), where(next));
    }
    REFIT_TRY(wait(program_.final_event, [&] {
      return program_.blocks.empty()
                 ? std::string("the final event")
                 : fmt::format("the unpacking after step {}", program_.blocks.back().step);
    }));
    report_sent(program_.blocks.size());
    return {};
  }

  std::string where(std::size_t started) const {
    if (started == 0) return "before the first step";
    return fmt::format("step {}", program_.blocks[started - 1].step);
  }

  [[nodiscard]] Result<void> wait_for_block(std::size_t block) {
    REFIT_TRY(wait(program_.blocks[block].done_event, [&] {
      return fmt::format("step {} ({} of {} on this process), where {}", program_.blocks[block].step,
                         block + 1, program_.blocks.size(), traffic_of(program_, block));
    }));
    report_sent(block + 1);
    return {};
  }

  // Tells on_chunk_sent of the sends of every block before `end` not told of yet.
  void report_sent(std::size_t end) {
    if (!options_.on_chunk_sent) return;
    const std::size_t first_op =
        reported_ < program_.blocks.size() ? program_.blocks[reported_].first_op : program_.ops.size();
    const std::size_t last_op =
        end < program_.blocks.size() ? program_.blocks[end].first_op : program_.ops.size();
    for (std::size_t i = first_op; i < last_op; ++i)
      if (const auto* p = std::get_if<P2p>(&program_.ops[i]); p && p->direction == Direction::kSend)
        options_.on_chunk_sent(p->transfer, p->chunk);
    reported_ = std::max(reported_, end);
  }

  // Polls until `event` is reached; `what` describes the awaited work for an error. run() aborts
  // the backend when this fails. The first kSpin of a wait polls without sleeping: a sleep of
  // 20 us lasts 60-80 us on Linux (timer slack), longer than the window's four steps of small
  // chunks keep the GPU busy, so a sleeping host would leave it idle between steps.
  template <class Describe>
  [[nodiscard]] Result<void> wait(std::int32_t event, Describe what) {
    constexpr auto kSpin = std::chrono::microseconds(200);
    const auto started = Clock::now();
    const auto deadline = started + budget_;
    while (true) {
      const bool reached = REFIT_TRY_IN(backend_.reached(event), what());
      if (reached) return {};
      const auto now = Clock::now();
      REFIT_TRY_IN(interrupt_.poll(now), what());
      if (now > deadline)
        return fail(ErrorCode::kTimeout,
                    fmt::format("{} made no progress for {} s; the communicator was aborted", what(),
                                options_.timeout.value));
      if (now - started < kSpin)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  const Program& program_;
  Backend& backend_;
  const RunOptions& options_;
  Clock::duration budget_;
  InterruptCheck interrupt_;
  std::size_t reported_ = 0;  // blocks whose sends on_chunk_sent was told of
};

}  // namespace

Result<Seconds> run_program(const Program& program, Backend& backend, const RunOptions& options) {
  const auto start = Clock::now();
  REFIT_TRY(Runner(program, backend, options).run());
  return seconds_since(start);
}

}  // namespace refit::nccl_detail
