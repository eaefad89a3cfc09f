#pragma once
// Faults `refit run` injects into itself when a test asks for one (the hidden option
// --test-fault RANK:PHASE:ACTION), so that the fault tests make a real process of a real run die
// or hang at a chosen point, and check what every other process does about it.
//
//   PHASE   set-up   before the rank plans (the others wait for it in their first collective)
//           prepare  inside the executor's prepare, once the plan hashes are agreed and before the
//                    memory keys are exchanged (its second collective)
//           connect  inside prepare, once the keys are exchanged, before the connection handshake
//           execute  once the rank has sent its first chunk
//           receive  once the rank first waits inside an execution (its grants are out, little or
//                    none of its data has landed): mid-transfer for a rank that only receives
//           relay    once the rank has sent its first chunk that forwards data it received
//           between  after the first execution, before the second (--iterations 2 or more)
//   ACTION  kill     SIGKILL, as a crash or the OOM killer would
//           stall    sleep for three timeouts without a heartbeat, then go on
//
// Before it acts the rank prints `refit-test: rank R PHASE ACTION at T` on stderr (T: seconds
// since the epoch), so a test can time every other rank's failure from the fault.
#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "refit/core/error.h"
#include "refit/core/units.h"
#include "refit/executors/bootstrap.h"
#include "refit/planner/plan.h"

namespace refit::cli {

enum class FaultPhase : std::uint8_t { kSetUp, kPrepare, kConnect, kExecute, kRelay, kBetween, kReceive };
enum class FaultAction : std::uint8_t { kKill, kStall };

struct Fault {
  std::int32_t rank = 0;
  FaultPhase phase = FaultPhase::kExecute;
  FaultAction action = FaultAction::kKill;
};

// "RANK:PHASE:ACTION", e.g. "1:relay:kill".
[[nodiscard]] Result<Fault> parse_fault(std::string_view text);

// The fault as one rank sees it: acts at most once, and only on the fault's rank and phase.
class FaultInjector {
 public:
  FaultInjector(std::optional<Fault> fault, std::int32_t rank, Seconds timeout)
      : fault_(fault), rank_(rank), timeout_(timeout) {}
  void at(FaultPhase phase);
  // For ExecutorOptions::on_chunk_sent: the execute and relay faults (empty when none applies).
  std::function<void(std::int32_t, std::int64_t)> on_chunk_sent(const Plan& plan);
  // For ExecutorOptions::interrupted: the receive fault (empty when none applies); never interrupts.
  std::function<bool()> interrupted();
  // Refuses a fault meant for this rank that never acted (a relay fault on a rank that forwards
  // nothing, an execute fault on one that only receives): a test built on it would pass without it.
  [[nodiscard]] Result<void> check_acted() const;

 private:
  std::optional<Fault> fault_;
  std::int32_t rank_;
  Seconds timeout_;
  bool done_ = false;
};

// The bootstrap handed to the executor: the real one, with the prepare fault before its second
// collective call and the connect fault after it.
class FaultyBootstrap final : public Bootstrap {
 public:
  FaultyBootstrap(Bootstrap& inner, FaultInjector& faults) : inner_(inner), faults_(faults) {}
  std::int32_t rank() const override { return inner_.rank(); }
  std::int32_t size() const override { return inner_.size(); }
  [[nodiscard]] Result<std::vector<std::string>> allgather(std::string_view mine) override;
  [[nodiscard]] Result<void> barrier() override;

 private:
  void before_call();
  Bootstrap& inner_;
  FaultInjector& faults_;
  std::int32_t calls_ = 0;
};

}  // namespace refit::cli
