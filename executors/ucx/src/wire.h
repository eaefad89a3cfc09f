#pragma once
// Control messages between the executors of one plan. Data moves by put; these small active
// messages only say where a chunk may land (grant), that it has landed (data), that a rank has
// finished (done) or failed (abort), that it is alive (heartbeat), and that its endpoints work
// (hello, at the end of prepare); in an elastic refit, that a transfer is dropped (its data will
// not come: a rank it depends on is gone) and that a peer of another membership is refused
// (fenced). Each carries the execution epoch, so a peer that already started the next execution
// is never taken for this one, and the membership epoch (0 outside elastic refits), so a peer of
// an old membership is never taken for a member.
#include <ucp/api/ucp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <list>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/units.h"

namespace refit::ucx_detail {

using Clock = std::chrono::steady_clock;

// A contiguous piece of a chunk and where it lies in a region of the receiver (in a grant) or of
// this rank (what a put reads).
struct Run {
  std::int64_t stream = 0;  // offset in the chunk
  std::uint32_t region = 0;
  std::int64_t offset = 0;  // offset in the region
  std::int64_t length = 0;
  bool operator==(const Run&) const = default;
};

enum class MessageKind : std::uint8_t {
  kGrant = 1,
  kData,
  kDone,
  kAbort,
  kHeartbeat,
  kHello,
  kDropped,
  kFenced
};

struct Message {
  MessageKind kind = MessageKind::kHeartbeat;
  std::int32_t from = 0;
  std::uint64_t epoch = 0;
  std::uint64_t membership = 0;  // the sender's membership epoch; 0 outside elastic refits
  std::int32_t transfer = -1;
  std::int64_t chunk = -1;
  std::vector<Run> runs;  // kGrant: where the chunk goes, in the receiver's regions
  std::string text;       // kAbort: why the sender gave up; kDone: the ranks it found gone;
                          // kFenced: why the receiver is refused
};

std::string encode(const Message& m);
std::optional<Message> decode(std::span<const std::byte> bytes);

// What the worker's callbacks deliver, kept until the executing thread looks.
struct Inbox {
  explicit Inbox(std::int32_t world)
      : last_heard(static_cast<std::size_t>(world)),
        endpoint_error(static_cast<std::size_t>(world)),
        given_up(static_cast<std::size_t>(world), false) {}
  std::deque<Message> messages;
  std::vector<Clock::time_point> last_heard;                // by rank: any message counts
  std::vector<std::optional<ucs_status_t>> endpoint_error;  // by rank
  std::vector<bool> given_up;  // by rank: taken for dead; its endpoint is closed without a flush
  std::optional<std::int32_t> malformed_from;  // a message that did not decode
};

// Registers the active-message handler that fills `inbox`; `inbox` must outlive the worker's use.
[[nodiscard]] Result<void> listen(ucp_worker_h worker, Inbox& inbox);
// Operations in flight with a completion callback. Items keep a stable address until swept.
template <class T>
class InFlight {
 public:
  struct Item {
    T value;
    bool done = false;
    ucs_status_t status = UCS_OK;
  };
  Item& add(T value) { return items_.emplace_back(Item{.value = std::move(value)}); }
  // The UCX send callback: `user_data` is the Item.
  static void completed(void* request, ucs_status_t status, void* user_data) {
    auto* item = static_cast<Item*>(user_data);
    item->done = true;
    item->status = status;
    ucp_request_free(request);
  }
  // Calls f(Item&) for every completed item, then forgets them.
  template <class F>
  void sweep(F&& f) {
    std::erase_if(items_, [&](Item& item) {
      if (!item.done) return false;
      f(item);
      return true;
    });
  }
  bool empty() const { return items_.empty(); }
  // Calls f(T&) for every item, completed or not.
  template <class F>
  void for_each(F&& f) {
    for (Item& item : items_) f(item.value);
  }
  template <class F>
  bool any_of(F&& f) const {
    return std::ranges::any_of(items_, [&](const Item& item) { return f(item.value); });
  }

 private:
  std::list<Item> items_;  // a list: callbacks hold item addresses while others are erased
};

// Control messages in flight; each buffer lives until UCX has sent it.
struct OutgoingMessage {
  std::string bytes;
  Rank to;
  std::uint64_t epoch = 0;
};

class Outbox {
 public:
  // Posts without blocking (eager: no rendezvous for control messages). Errors name the peer
  // when UCX refuses the send outright.
  [[nodiscard]] Result<void> post(ucp_ep_h ep, Rank to, const Message& m);
  // The first peer a completed send of `epoch` failed to, if any; forgets completed sends.
  std::optional<std::pair<Rank, ucs_status_t>> sweep(std::uint64_t epoch);
  bool empty() const { return in_flight_.empty(); }
  // No message in flight but to the ranks `ignored` marks (by rank): an elastic refit does not
  // wait for messages to peers it no longer waits for.
  bool empty_but_for(const std::vector<bool>& ignored) const;

 private:
  InFlight<OutgoingMessage> in_flight_;
};

}  // namespace refit::ucx_detail
