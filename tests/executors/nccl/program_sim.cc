#include "program_sim.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "device_copy.h"
#include "program_bounds.h"
#include "quantize_kernel_body.h"
#include "refit/core/try.h"

namespace refit::nccl_detail::testing {
namespace {

StreamKind stream_of(const Op& op) {
  if (const auto* r = std::get_if<Record>(&op)) return r->stream;
  if (const auto* w = std::get_if<Wait>(&op)) return w->stream;
  return std::holds_alternative<CopyBatch>(op) || std::holds_alternative<Quantize>(op) ? StreamKind::kCopy
                                                                                       : StreamKind::kComm;
}

class ProcessState {
 public:
  explicit ProcessState(const SimProcess& p)
      : p_(p),
        staging_(static_cast<std::size_t>(p.program->staging_bytes), std::byte{0xA5}),
        scratch_(static_cast<std::size_t>(p.program->scratch_bytes), std::byte{0x5A}),
        reached_(static_cast<std::size_t>(p.program->events), false) {
    for (std::size_t i = 0; i < ops().size(); ++i) queue(stream_of(ops()[i])).push_back(i);
  }

  std::int32_t comm_rank() const { return p_.comm_rank; }
  bool finished() const { return at_[0] == queues_[0].size() && at_[1] == queues_[1].size(); }

  // Runs a stream until an op must wait (a Wait on an unreached event, or a group); true if any ran.
  bool advance(StreamKind k) {
    bool ran = false;
    auto& at = at_[static_cast<int>(k)];
    const auto& q = queue(k);
    for (; at < q.size(); ++at, ran = true) {
      const Op& op = ops()[q[at]];
      if (const auto* w = std::get_if<Wait>(&op)) {
        if (!reached_[static_cast<std::size_t>(w->event)]) break;
      } else if (const auto* r = std::get_if<Record>(&op)) {
        reached_[static_cast<std::size_t>(r->event)] = true;
      } else if (const auto* b = std::get_if<CopyBatch>(&op)) {
        run_batch(*b);
      } else if (const auto* z = std::get_if<Quantize>(&op)) {
        run_quantize(*z);
      } else {
        break;
      }
    }
    return ran;
  }

  // The step of the group at the head of the comm stream, or -1.
  std::int32_t group_step() const {
    const auto& q = queue(StreamKind::kComm);
    const auto at = at_[static_cast<int>(StreamKind::kComm)];
    if (at == q.size()) return -1;
    const auto* g = std::get_if<GroupStart>(&ops()[q[at]]);
    return g ? g->step : -1;
  }
  std::vector<const P2p*> group_ops() const {
    std::vector<const P2p*> out;
    const auto& q = queue(StreamKind::kComm);
    for (auto at = at_[static_cast<int>(StreamKind::kComm)] + 1;
         !std::holds_alternative<GroupEnd>(ops()[q[at]]); ++at)
      out.push_back(&std::get<P2p>(ops()[q[at]]));
    return out;
  }
  void pop_group() {
    auto& at = at_[static_cast<int>(StreamKind::kComm)];
    while (!std::holds_alternative<GroupEnd>(ops()[queue(StreamKind::kComm)[at]])) ++at;
    ++at;
  }

  std::byte* resolve(const Address& a) {
    std::byte* base = a.kind == BufferKind::kShard     ? p_.shards[static_cast<std::size_t>(a.index)].data()
                      : a.kind == BufferKind::kStaging ? staging_.data() + p_.program->staging_start(a.index)
                                                       : scratch_.data();
    return reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(base) +
                                        static_cast<std::uintptr_t>(a.offset));
  }

  std::string heads() const {
    std::string out;
    for (int k = 0; k < 2; ++k) {
      const auto& q = queues_[k];
      out += fmt::format(" {} stream at op {}", k == 0 ? "copy" : "comm",
                         at_[k] < q.size() ? q[at_[k]] : ops().size());
    }
    return out;
  }

 private:
  const std::vector<Op>& ops() const { return p_.program->ops; }
  std::vector<std::size_t>& queue(StreamKind k) { return queues_[static_cast<int>(k)]; }
  const std::vector<std::size_t>& queue(StreamKind k) const { return queues_[static_cast<int>(k)]; }

  void run_batch(const CopyBatch& b) {
    std::vector<DeviceCopy> copies;
    for (const auto& c : b.copies)
      copies.push_back(make_device_copy(c.geometry, resolve(c.src), resolve(c.dst)));
    number_items(copies);
    run_batch_on_host(copies);
  }

  void run_quantize(const Quantize& z) {
    DeviceQuantize q;
    const bool made = make_device_quantize(
        z.scheme, reinterpret_cast<const std::uint16_t*>(resolve(z.source)), z.shape.data(), z.strides.data(),
        static_cast<int>(z.shape.size()), reinterpret_cast<std::uint8_t*>(resolve(z.values)),
        reinterpret_cast<unsigned char*>(resolve(z.scales)), q);
    if (made) run_quantize_on_host(q);
  }

  const SimProcess& p_;
  std::vector<std::byte> staging_;
  std::vector<std::byte> scratch_;
  std::vector<bool> reached_;
  std::vector<std::size_t> queues_[2];
  std::size_t at_[2] = {0, 0};
};

class Simulation {
 public:
  explicit Simulation(std::span<const SimProcess> processes) {
    for (const auto& p : processes) {
      by_comm_[p.comm_rank] = states_.size();
      states_.emplace_back(p);
    }
  }

  [[nodiscard]] Result<void> run(SimPolicy policy) {
    while (true) {
      bool progress = policy == SimPolicy::kCopyFirst && copies();
      const bool comm = REFIT_TRY(groups());
      progress = progress || comm;
      if (policy == SimPolicy::kCommFirst) progress = copies() || progress;
      if (std::ranges::all_of(states_, [](const ProcessState& s) { return s.finished(); })) return {};
      if (!progress) return fail(ErrorCode::kInternal, "deadlock:" + heads());
    }
  }

 private:
  bool copies() {
    bool any = false;
    for (bool ran = true; ran;) {
      ran = false;
      for (auto& s : states_) ran = s.advance(StreamKind::kCopy) || ran;
      any = any || ran;
    }
    return any;
  }

  // Runs comm-stream ops and every group whose processes have all reached it, until stuck.
  [[nodiscard]] Result<bool> groups() {
    bool any = false;
    for (bool ran = true; ran;) {
      ran = false;
      for (auto& s : states_) ran = s.advance(StreamKind::kComm) || ran;
      for (std::size_t i = 0; i < states_.size(); ++i) {
        const bool done = REFIT_TRY(try_group(i));
        ran = ran || done;
      }
      any = any || ran;
    }
    return any;
  }

  // The processes of the group at process i's comm head, if all of them have reached it.
  std::optional<std::vector<std::size_t>> members(std::size_t i) const {
    const auto step = states_[i].group_step();
    if (step < 0) return std::nullopt;
    std::vector<std::size_t> set{i};
    for (std::size_t k = 0; k < set.size(); ++k)
      for (const auto* op : states_[set[k]].group_ops()) {
        const auto peer = by_comm_.at(op->peer_comm);
        if (states_[peer].group_step() != step) return std::nullopt;
        if (std::ranges::find(set, peer) == set.end()) set.push_back(peer);
      }
    return set;
  }

  [[nodiscard]] Result<bool> try_group(std::size_t i) {
    const auto set = members(i);
    if (!set) return false;
    using Side = std::vector<std::pair<std::size_t, const P2p*>>;
    std::map<std::pair<std::int32_t, std::int32_t>, Side[2]> pairs;  // (from, to) -> sends, receives
    for (const auto m : *set)
      for (const auto* op : states_[m].group_ops()) {
        const bool send = op->direction == Direction::kSend;
        const auto me = states_[m].comm_rank();
        pairs[send ? std::pair(me, op->peer_comm) : std::pair(op->peer_comm, me)][send ? 0 : 1].emplace_back(
            m, op);
      }
    for (auto& [pair, sides] : pairs) REFIT_TRY(match(pair, sides[0], sides[1]));
    for (const auto m : *set) states_[m].pop_group();
    return true;
  }

  using Ends = std::vector<std::pair<std::size_t, const P2p*>>;
  [[nodiscard]] Result<void> match(std::pair<std::int32_t, std::int32_t> pair, const Ends& sends,
                                   const Ends& receives) {
    const auto step = sends.empty() ? receives.front().second->step : sends.front().second->step;
    if (sends.size() != receives.size())
      return fail(ErrorCode::kInternal,
                  fmt::format("step {}: communicator rank {} posts {} sends to {}, which posts {} receives",
                              step, pair.first, sends.size(), pair.second, receives.size()));
    for (std::size_t k = 0; k < sends.size(); ++k) {
      const auto& [sp, s] = sends[k];
      const auto& [rp, r] = receives[k];
      if (s->bytes != r->bytes || s->transfer != r->transfer || s->chunk != r->chunk)
        return fail(ErrorCode::kInternal,
                    fmt::format("step {}: send {} of transfer {} chunk {} ({} bytes) meets a receive of "
                                "transfer {} chunk {} ({} bytes)",
                                step, k, s->transfer, s->chunk, s->bytes, r->transfer, r->chunk, r->bytes));
      std::memcpy(states_[rp].resolve(r->at), states_[sp].resolve(s->at), static_cast<std::size_t>(s->bytes));
    }
    return {};
  }

  std::string heads() const {
    std::string out;
    for (const auto& s : states_) out += fmt::format(" [comm rank {}:{}]", s.comm_rank(), s.heads());
    return out;
  }

  std::vector<ProcessState> states_;
  std::map<std::int32_t, std::size_t> by_comm_;
};

}  // namespace

Result<void> simulate(std::span<const SimProcess> processes, SimPolicy policy) {
  for (const auto& p : processes) {
    std::vector<std::int64_t> sizes;
    for (const auto& s : p.shards) sizes.push_back(static_cast<std::int64_t>(s.size()));
    REFIT_TRY(check_bounds(*p.program, sizes));
  }
  return Simulation(processes).run(policy);
}

}  // namespace refit::nccl_detail::testing
