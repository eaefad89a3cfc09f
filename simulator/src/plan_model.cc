// A transfer becomes tasks on the resources it crosses:
//   network: sender NIC tx, receiver NIC rx (and the domains' uplinks when the fabric is
//            oversubscribed); nvlink: sender GPU NVLink out, receiver GPU NVLink in;
//   local:   the GPU's copy engine.
// A message that must be packed (several segments, or one that is not a contiguous run of the
// sender's buffer) also crosses the sender's copy engine, and likewise the receiver's for
// unpacking: packing runs chunk by chunk beside the transfer, so only the first chunk's pack and
// the last chunk's unpack add time, as latency of the first and last task.
// Relays pipeline: a transfer that feeds relays is cut into a head (its first chunk) and a body;
// a relay, whose data all comes from one upstream transfer, starts once the upstream's head has
// arrived, and its own last chunk (a tail task) cannot end before the upstream has ended. So an
// h-hop chain of equal links takes bytes/bw + (h-1)*chunk/bw. A transfer fed by several
// upstream transfers waits for all of them to end.
// Each (sender, receiver) pair is one in-order stream of chunks, as in the UCX executor: the
// receiver grants each sender `window` chunks ahead, in plan order, and the sender puts a
// pair's chunks in queue order, stopping at the first one whose forwarded data has not landed.
// So a transfer of a pair starts once (a) the chunk `window` chunks before its first has
// landed (conservatively: the end of the pair's transfer holding that chunk), and (b) every
// earlier transfer of the pair had its data to forward (the ends of their upstream transfers).
// With messages of more than `window` chunks a pair's transfers run one after the other, one
// flow per pair, which is also how a NIC shares itself: per queue pair, not per message.
// Different pairs run at once; window 0 lifts (a) and (b), every transfer starts when its data
// is there.
#include "plan_model.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

namespace refit::sim {
namespace {

bool contiguous_in(const Box& sub, const Box& whole) {
  std::size_t d = 0;
  while (d < sub.rank() && sub.extent[d] == 1) ++d;
  for (std::size_t j = d + 1; j < sub.rank(); ++j)
    if (sub.extent[j] != whole.extent[j]) return false;
  return true;
}

class Builder {
 public:
  Builder(const Plan& plan, const ReshardProblem& problem, const Cluster& cluster, std::int32_t window)
      : plan_(plan), problem_(problem), c_(cluster), window_(window) {}

  PlanModel build() {
    add_resources();
    find_binding_copy_engines();
    count_pipelined_dependents();
    ends_.resize(plan_.transfers.size());
    heads_.resize(plan_.transfers.size());
    out_.model.reserve_tasks(plan_.transfers.size() * 2, 4, 3);
    for (const auto& t : plan_.transfers) add_transfer(t);
    return std::move(out_);
  }

 private:
  struct GpuResources {
    ResourceId nvlink_out, nvlink_in, copy;
  };
  // The transfers of one (sender, receiver) pair so far, in plan order.
  struct PairStream {
    std::vector<std::int64_t> chunks_end;  // chunks of the pair up to and including transfer i
    std::vector<TaskId> ends;              // the end of transfer i
    std::optional<TaskId> forwarded;       // ends once every forwarded byte so far has landed
    std::int64_t chunks() const { return chunks_end.empty() ? 0 : chunks_end.back(); }
  };

  void add_resources() {
    auto& m = out_.model;
    m.name_category(static_cast<std::uint32_t>(TaskKind::kNetwork), "network");
    m.name_category(static_cast<std::uint32_t>(TaskKind::kNvlink), "nvlink");
    m.name_category(static_cast<std::uint32_t>(TaskKind::kCopy), "copy");
    for (const auto& g : c_.gpus()) {
      gpu_.push_back({m.add_resource(fmt::format("gpu {} nvlink out", g.id.value), g.nvlink_bandwidth),
                      m.add_resource(fmt::format("gpu {} nvlink in", g.id.value), g.nvlink_bandwidth),
                      m.add_resource(fmt::format("gpu {} copy", g.id.value), g.copy_bandwidth)});
      gpu_track_.push_back(m.add_track(fmt::format("gpu {}", g.id.value)));
    }
    for (const auto& n : c_.nics()) {
      nic_tx_.push_back(m.add_resource(fmt::format("nic {} tx", n.id), n.bandwidth));
      nic_rx_.push_back(m.add_resource(fmt::format("nic {} rx", n.id), n.bandwidth));
      nic_track_.push_back(m.add_track(fmt::format("nic {}", n.id)));
    }
    if (c_.fabric().oversubscription > 1.0)
      for (const auto& d : c_.domains()) {
        const auto bw = c_.domain_nic_bandwidth(d.id) * (1.0 / c_.fabric().oversubscription);
        uplink_out_.push_back(m.add_resource(fmt::format("domain {} uplink out", d.id), bw));
        uplink_in_.push_back(m.add_resource(fmt::format("domain {} uplink in", d.id), bw));
      }
  }

  // A copy engine faster than all the links of its GPU together can never be a bottleneck;
  // leaving it out of the flows keeps the max-min problem small and its components apart.
  void find_binding_copy_engines() {
    std::vector<double> links(c_.gpus().size(), 0.0);
    for (const auto& g : c_.gpus()) links[static_cast<std::size_t>(g.id.value)] = 2 * g.nvlink_bandwidth.value;
    for (const auto& n : c_.nics())
      for (auto g : n.gpus) links[static_cast<std::size_t>(g.value)] += 2 * n.bandwidth.value;
    for (const auto& g : c_.gpus())
      copy_can_bind_.push_back(g.copy_bandwidth.value < links[static_cast<std::size_t>(g.id.value)]);
  }

  void count_pipelined_dependents() {
    has_pipelined_dependent_.assign(plan_.transfers.size(), false);
    single_upstream_.assign(plan_.transfers.size(), -1);
    for (const auto& t : plan_.transfers) {
      const auto up = t.upstream();
      if (up.size() != 1) continue;
      single_upstream_[static_cast<std::size_t>(t.id)] = up[0];
      has_pipelined_dependent_[static_cast<std::size_t>(up[0])] = true;
    }
  }

  std::size_t gpu_index(Rank r) const { return static_cast<std::size_t>(c_.gpu_of(r).value); }

  // The buffer holding rank r's data of tensor t: its source box for its own shards, its
  // destination box for what it received (nothing when forwarded data lands in scratch).
  std::optional<Box> buffer_box(Rank r, std::uint32_t tensor, bool source) const {
    const auto& spec = problem_.tensors()[tensor];
    const auto box = (source ? spec.source : spec.destination).local_box(r);
    return box ? std::optional<Box>(*box) : std::nullopt;
  }

  bool needs_copy(const Transfer& t, bool sender_side) const {
    if (t.segments.size() != 1) return true;
    const auto& s = t.segments[0];
    const Rank r = sender_side ? t.sender : t.receiver;
    const bool source = sender_side && s.via == kFromSourceShard;
    const auto box = buffer_box(r, s.tensor, source);
    return box && box->contains(s.box) && !contiguous_in(s.box, *box);
  }

  std::vector<ResourceId> link_resources(const Transfer& t, bool pack, bool unpack) const {
    std::vector<ResourceId> r;
    const auto& gs = gpu_[gpu_index(t.sender)];
    const auto& gr = gpu_[gpu_index(t.receiver)];
    switch (t.link) {
      case LinkKind::kNetwork:
        if (auto n = c_.nic_of(t.sender)) r.push_back(nic_tx_[static_cast<std::size_t>(*n)]);
        if (auto n = c_.nic_of(t.receiver)) r.push_back(nic_rx_[static_cast<std::size_t>(*n)]);
        if (!uplink_out_.empty()) {
          r.push_back(uplink_out_[static_cast<std::size_t>(c_.domain_of(t.sender))]);
          r.push_back(uplink_in_[static_cast<std::size_t>(c_.domain_of(t.receiver))]);
        }
        break;
      case LinkKind::kNvlink:
        r.push_back(gs.nvlink_out);
        r.push_back(gr.nvlink_in);
        break;
      case LinkKind::kLocal:
        r.push_back(gs.copy);
        break;
    }
    if (pack && copy_can_bind_[gpu_index(t.sender)]) r.push_back(gs.copy);
    if (unpack && copy_can_bind_[gpu_index(t.receiver)]) r.push_back(gr.copy);
    return r;
  }

  TaskKind kind_of(LinkKind k) const {
    return k == LinkKind::kNetwork ? TaskKind::kNetwork
                                   : k == LinkKind::kNvlink ? TaskKind::kNvlink : TaskKind::kCopy;
  }

  Seconds latency_of(const Transfer& t) const {
    if (t.link != LinkKind::kNetwork) return c_.nvlink_latency();
    const auto n = c_.nic_of(t.sender);
    return n ? c_.nics()[static_cast<std::size_t>(*n)].latency : c_.nvlink_latency();
  }

  TaskId task(const Transfer& t, Bytes bytes, Seconds latency, Seconds copy_latency,
              std::vector<TaskId> deps) {
    label_ = fmt::format("#{} {}->{}", t.id, t.sender.value, t.receiver.value);
    const TaskId id = out_.model.add_task(TaskSpec{bytes, latency + copy_latency, resources_, std::move(deps),
                                                   track_, static_cast<std::uint32_t>(kind_), label_});
    out_.transfer_of_task.push_back(t.id);
    out_.copy_latency.push_back(copy_latency);
    return id;
  }

  std::int32_t track_of(const Transfer& t) const {
    if (t.link == LinkKind::kNetwork)
      if (auto n = c_.nic_of(t.sender)) return nic_track_[static_cast<std::size_t>(*n)];
    return gpu_track_[gpu_index(t.sender)];
  }

  PairStream& pair_of(const Transfer& t) {
    const auto key = static_cast<std::uint64_t>(t.sender.value) * static_cast<std::uint64_t>(plan_.world_size()) +
                     static_cast<std::uint64_t>(t.receiver.value);
    return pairs_[key];
  }

  // What the transfer's first task waits for: its upstream, a grant (chunk f - window of the
  // pair has landed, f being the pair's chunks before this transfer), and the pair's earlier
  // transfers having had their forwarded data.
  std::vector<TaskId> start_deps(const Transfer& t, const std::vector<std::int32_t>& upstream,
                                 const PairStream& pair) const {
    std::vector<TaskId> deps;
    const auto up = single_upstream_[static_cast<std::size_t>(t.id)];
    if (up >= 0) {
      deps.push_back(heads_[static_cast<std::size_t>(up)]);
    } else {
      for (auto u : upstream) deps.push_back(ends_[static_cast<std::size_t>(u)]);
    }
    if (window_ == 0) return deps;
    const std::int64_t before = pair.chunks();
    if (before >= window_) {
      const auto holder = std::ranges::upper_bound(pair.chunks_end, before - window_) - pair.chunks_end.begin();
      deps.push_back(pair.ends[static_cast<std::size_t>(holder)]);
    }
    if (pair.forwarded) deps.push_back(*pair.forwarded);
    return deps;
  }

  // After a relay joins the pair, later transfers of the pair also wait for its upstream's end:
  // the sender's queue walk stops at the relay's last chunk until that data has landed.
  void record_in_pair(const Transfer& t, const std::vector<std::int32_t>& upstream, PairStream& pair, TaskId end) {
    pair.chunks_end.push_back(pair.chunks() + t.chunk_count());
    pair.ends.push_back(end);
    if (window_ == 0 || upstream.empty()) return;
    std::vector<TaskId> deps;
    for (auto u : upstream) deps.push_back(ends_[static_cast<std::size_t>(u)]);
    if (pair.forwarded) deps.push_back(*pair.forwarded);
    resources_.clear();
    track_ = -1;  // a pure dependency node: nothing to draw
    pair.forwarded = task(t, Bytes{0}, Seconds{0}, Seconds{0}, std::move(deps));
  }

  Seconds copy_time(bool needed, Bytes chunk, Rank r) const {
    return needed ? transfer_time(chunk, c_.gpu(c_.gpu_of(r)).copy_bandwidth) : Seconds{0};
  }

  void add_transfer(const Transfer& t) {
    const auto id = static_cast<std::size_t>(t.id);
    const bool pack = needs_copy(t, true);
    const bool unpack = needs_copy(t, false);
    const Bytes chunk{std::min(t.chunk.value, t.bytes.value)};
    const Seconds pack_s = copy_time(pack, chunk, t.sender);
    const Seconds unpack_s = copy_time(unpack, chunk, t.receiver);
    resources_ = link_resources(t, pack, unpack);
    kind_ = kind_of(t.link);
    track_ = track_of(t);
    const auto upstream = single_upstream_[id];
    const bool relay = upstream >= 0;
    auto& pair = pair_of(t);
    const auto upstreams = t.upstream();
    TaskId last;
    if (!relay && !has_pipelined_dependent_[id]) {
      last = heads_[id] = task(t, t.bytes, latency_of(t), pack_s + unpack_s, start_deps(t, upstreams, pair));
    } else {
      last = heads_[id] = task(t, chunk, latency_of(t), pack_s, start_deps(t, upstreams, pair));
      const Bytes tail{relay ? std::min(chunk.value, (t.bytes - chunk).value) : 0};
      const Bytes body = t.bytes - chunk - tail;
      if (body.value > 0) last = task(t, body, Seconds{0}, relay ? Seconds{0} : unpack_s, {last});
      if (relay) last = task(t, tail, Seconds{0}, unpack_s, {last, ends_[static_cast<std::size_t>(upstream)]});
    }
    ends_[id] = last;
    record_in_pair(t, upstreams, pair, last);
  }

  const Plan& plan_;
  const ReshardProblem& problem_;
  const Cluster& c_;
  PlanModel out_;
  std::vector<GpuResources> gpu_;
  std::vector<std::int32_t> gpu_track_, nic_track_;
  std::vector<ResourceId> nic_tx_, nic_rx_, uplink_out_, uplink_in_;
  std::vector<bool> has_pipelined_dependent_;
  std::vector<bool> copy_can_bind_;  // per GPU
  std::vector<std::int32_t> single_upstream_;
  std::vector<TaskId> heads_, ends_;
  std::vector<ResourceId> resources_;  // of the transfer being translated
  TaskKind kind_ = TaskKind::kNetwork;
  std::int32_t track_ = -1;
  std::int64_t window_;  // chunks granted ahead per pair; 0: no limit
  std::unordered_map<std::uint64_t, PairStream> pairs_;  // by sender * world + receiver
  std::string label_;
};

}  // namespace

PlanModel build_plan_model(const Plan& plan, const ReshardProblem& problem, const Cluster& cluster,
                           std::int32_t window) {
  return Builder(plan, problem, cluster, window).build();
}

}  // namespace refit::sim
