#include "run_faults.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "say.h"

namespace refit::cli {
namespace {

constexpr std::string_view kPhases[] = {"set-up", "prepare", "connect", "execute",
                                        "relay",  "between", "receive"};
constexpr std::string_view kActions[] = {"kill", "stall"};

template <class Enum, std::size_t N>
std::optional<Enum> named(std::string_view text, const std::string_view (&names)[N]) {
  for (std::size_t i = 0; i < N; ++i)
    if (names[i] == text) return static_cast<Enum>(i);
  return std::nullopt;
}

}  // namespace

Result<Fault> parse_fault(std::string_view text) {
  const auto first = text.find(':');
  const auto second = first == std::string_view::npos ? first : text.find(':', first + 1);
  const auto refuse = [&] {
    return invalid(
        fmt::format("--test-fault: '{}' is not RANK:PHASE:ACTION (PHASE set-up, prepare, connect, execute, "
                    "relay, between or receive; ACTION kill or stall)",
                    text));
  };
  if (second == std::string_view::npos) return refuse();
  Fault f;
  const auto rank = text.substr(0, first);
  if (rank.empty() || rank.find_first_not_of("0123456789") != std::string_view::npos || rank.size() > 9)
    return refuse();
  f.rank = std::stoi(std::string(rank));
  const auto phase = named<FaultPhase>(text.substr(first + 1, second - first - 1), kPhases);
  const auto action = named<FaultAction>(text.substr(second + 1), kActions);
  if (!phase || !action) return refuse();
  f.phase = *phase;
  f.action = *action;
  return f;
}

void FaultInjector::at(FaultPhase phase) {
  if (done_ || !fault_ || fault_->rank != rank_ || fault_->phase != phase) return;
  done_ = true;
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  say("refit-test: rank {} {} {} at {:.3f}\n", rank_, kPhases[static_cast<int>(phase)],
      kActions[static_cast<int>(fault_->action)], now);
  std::fflush(stderr);
  if (fault_->action == FaultAction::kKill) std::raise(SIGKILL);
  std::this_thread::sleep_for(std::chrono::duration<double>(3 * timeout_.value));
}

std::function<void(std::int32_t, std::int64_t)> FaultInjector::on_chunk_sent(const Plan& plan) {
  if (!fault_ || fault_->rank != rank_) return {};
  if (fault_->phase == FaultPhase::kExecute)
    return [this](std::int32_t, std::int64_t) { at(FaultPhase::kExecute); };
  if (fault_->phase == FaultPhase::kRelay) {
    std::vector<bool> relays;  // by transfer: it forwards data its sender received
    for (const auto& t : plan.transfers) relays.push_back(!t.upstream().empty());
    return [this, relays = std::move(relays)](std::int32_t transfer, std::int64_t) {
      if (relays[static_cast<std::size_t>(transfer)]) at(FaultPhase::kRelay);
    };
  }
  return {};
}

std::function<bool()> FaultInjector::interrupted() {
  if (!fault_ || fault_->rank != rank_ || fault_->phase != FaultPhase::kReceive) return {};
  return [this] {
    at(FaultPhase::kReceive);
    return false;
  };
}

Result<void> FaultInjector::check_acted() const {
  if (done_ || !fault_ || fault_->rank != rank_) return {};
  return invalid(fmt::format("--test-fault: rank {} never reached '{}' in this run, so nothing was broken",
                             rank_, kPhases[static_cast<int>(fault_->phase)]));
}

void FaultyBootstrap::before_call() {
  if (++calls_ == 2) faults_.at(FaultPhase::kPrepare);
}

Result<std::vector<std::string>> FaultyBootstrap::allgather(std::string_view mine) {
  before_call();
  auto all = inner_.allgather(mine);
  if (calls_ == 2) faults_.at(FaultPhase::kConnect);  // the keys are exchanged
  return all;
}

Result<void> FaultyBootstrap::barrier() {
  before_call();
  return inner_.barrier();
}

}  // namespace refit::cli
