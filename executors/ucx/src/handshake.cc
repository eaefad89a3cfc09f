#include "handshake.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "refit/core/elapsed.h"
#include "refit/core/try.h"

namespace refit::ucx_detail {
namespace {

constexpr std::chrono::milliseconds kLongestSleep{100};

// Takes the hellos of `epoch` out of the inbox; true when one arrived.
bool collect_hellos(Inbox& inbox, std::uint64_t epoch, std::vector<bool>& heard) {
  bool any = false;
  std::erase_if(inbox.messages, [&](const Message& m) {
    if (m.kind != MessageKind::kHello || m.epoch != epoch) return false;
    heard[static_cast<std::size_t>(m.from)] = any = true;
    return true;
  });
  return any;
}

}  // namespace

Result<void> handshake(const HandshakeParties& p, Rank self, std::uint64_t epoch, Seconds timeout) {
  const auto world = p.connections.world();
  std::vector<bool> heard(static_cast<std::size_t>(world), false);
  heard[static_cast<std::size_t>(self.value)] = true;
  Message hello;
  hello.kind = MessageKind::kHello;
  hello.from = self.value;
  hello.epoch = epoch;
  for (std::int32_t r = 0; r < world; ++r)
    if (r != self.value) REFIT_TRY(p.outbox.post(p.connections.peer(Rank{r}).endpoint, Rank{r}, hello));
  const auto deadline = Clock::now() + to_duration(timeout);
  while (true) {
    p.worker.progress_all();
    const bool arrived = collect_hellos(p.inbox, epoch, heard);
    if (const auto failed = p.outbox.sweep(epoch))
      return fail(ErrorCode::kPeerFailed,
                  fmt::format("rank {} is unreachable: hello failed ({})", failed->first.value,
                              ucs_status_string(failed->second)));
    // Done when every peer was heard and our own hellos have left: a hello still queued behind
    // connection setup needs this rank to keep progressing.
    if (std::ranges::all_of(heard, [](bool h) { return h; }) && p.outbox.empty()) return {};
    const auto now = Clock::now();
    if (now >= deadline) {
      std::vector<std::int32_t> silent;
      for (std::int32_t r = 0; r < world; ++r)
        if (!heard[static_cast<std::size_t>(r)]) silent.push_back(r);
      return fail(ErrorCode::kTimeout,
                  fmt::format("{} {} did not answer within {} s of connecting",
                              silent.size() == 1 ? "rank" : "ranks", fmt::join(silent, ", "), timeout.value));
    }
    if (arrived) continue;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now);
    REFIT_TRY(p.worker.wait(std::min(left, kLongestSleep)));
  }
}

}  // namespace refit::ucx_detail
