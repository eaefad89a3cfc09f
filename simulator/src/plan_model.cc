// A transfer becomes tasks on the resources it crosses:
//   network: sender NIC tx, receiver NIC rx (and the domains' uplinks when the fabric is
//            oversubscribed); nvlink: sender GPU NVLink out, receiver GPU NVLink in;
//   local:   the GPU's copy engine.
// Chunks and copies are the lowering's (refit::lowering): a transfer has the chunks every executor
// cuts, and a transfer some of whose chunks the lowering packs (unpacks) under the execution
// model's zero-copy rule also crosses the sender's (receiver's) copy engine. Packing runs chunk by
// chunk beside the transfer, so only the first chunk's pack and the last chunk's unpack add time:
// the pack as latency of the first task, the unpack as a task of its own after the last one (not
// in the pair's stream, which goes on meanwhile).
// Relays pipeline: a relay, whose data all comes from one upstream transfer, starts once the
// upstream chunks its head forwards have arrived, and its own last head cannot go before the
// upstream chunk holding its last byte has (the lowering's chunk waits; the upstream's end when
// the relay forwards all of it). The upstream is cut after those chunks, and after its head (its
// first chunk, or its first slice where the schedule's relays store and forward slices). So an
// h-hop chain of equal links takes bytes/bw + (h-1)*head/bw, and a relay of part of a message
// goes when that part has landed. A transfer fed by several upstream transfers waits for all of
// them to end.
// Each (sender, receiver) pair of a call queue is one stream (model.h), as in the UCX executor
// (one queue: the whole plan) and as a communicator's connections: its transfers go
// in plan order, each one's latency paid while the ones before it flow, and the pair's flow runs
// on from one to the next without a new fair share. The receiver grants each sender `window`
// chunks ahead, so a transfer is posted once the chunk `window` chunks before its first has
// landed: the pair's transfer holding that chunk is cut after it, and the later transfer depends
// on that piece. A relay's last chunk waiting for its upstream stops the pair's queue there, as
// the executor's walk of the queue does. Different pairs run at once, each one flow, which is how
// a NIC shares itself: per queue pair, not per message. Window 0 models no queues: every transfer
// starts when its data is there, as a flow of its own; unless the schedule's pairs are in order
// (calls.h), which keeps the streams without grants.
// Calls (calls.h): a call is a start task (its launch cost, after the previous call of its queue
// and its `after` calls), copy tasks on the ranks' copy engines before and after its bytes, its
// transfers (each first piece after the start and its sender's copy) or its collective's channel
// flows (collective_flows.h), and an end task (its finish cost) after all of them. Pairs send in
// call order, then plan order; transfers no call moves are not run; store-and-forward relays
// start once their upstream has ended.
// FP8 in flight (quantize_work.h): a sender that quantises weights does so once, in a task of its
// own before its first transfer of them; a receiver that quantises what lands does so in a task
// after the last of those transfers.
#include "plan_model.h"

#include "call_check.h"
#include "collective_flows.h"
#include "quantize_work.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <optional>
#include <span>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::sim {
namespace {

std::size_t at(std::int32_t i) { return static_cast<std::size_t>(i); }

class Builder {
 public:
  Builder(const Plan& plan, const lowering::LoweredPlan& lowered,
          std::vector<lowering::TransferCopyCost> costs, const PlacedCluster& cluster,
          const PlanModelOptions& options, std::vector<std::int32_t> call_of, QuantizeWork quantize)
      : plan_(plan),
        lowered_(lowered),
        costs_(std::move(costs)),
        c_(cluster),
        calls_(options.calls),
        call_of_(std::move(call_of)),
        window_(options.window),
        quantize_(std::move(quantize)) {}

  [[nodiscard]] Result<PlanModel> build() {
    add_resources();
    find_binding_copy_engines();
    index_upstreams();
    REFIT_TRY(anchor_relays());
    order_transfers();
    plan_streams();
    ends_.resize(plan_.transfers.size());
    piece_range_.assign(plan_.transfers.size(), {0, 0});
    pieces_.reserve(plan_.transfers.size() * 2);
    out_.model.reserve_tasks(plan_.transfers.size() * 3, 4, 2);
    out_.transfer_of_task.reserve(plan_.transfers.size() * 3);
    out_.copy_latency.reserve(plan_.transfers.size() * 3);
    add_sender_quantization();
    if (!calls_) {
      for (const std::int32_t t : order_) add_transfer(plan_.transfers[at(t)]);
    } else {
      copy_task_.assign(at(plan_.world_size()), -1);
      for (std::size_t c = 0; c < calls_->calls.size(); ++c) add_call(static_cast<std::int32_t>(c));
    }
    add_receiver_quantization();
    return std::move(out_);
  }

 private:
  // A transfer waits for chunk `chunks` of `holder` (counted from 1 within it) to land.
  struct Grant {
    std::int32_t holder = -1;
    std::int64_t chunks = 0;
  };
  // The upstream chunks (counted from 1 within it) a pipelined relay's head and its last chunk
  // wait for.
  struct Anchor {
    std::int64_t head = 0;
    std::int64_t last = 0;
  };
  // A piece of a transfer: its chunks up to `chunks` (counted from 1 within it), as one task.
  struct Piece {
    std::int64_t chunks;
    TaskId task;
  };

  void add_resources() {
    auto& m = out_.model;
    m.name_category(static_cast<std::uint32_t>(TaskKind::kNetwork), "network");
    m.name_category(static_cast<std::uint32_t>(TaskKind::kNvlink), "nvlink");
    m.name_category(static_cast<std::uint32_t>(TaskKind::kCopy), "copy");
    m.name_category(static_cast<std::uint32_t>(TaskKind::kPack), "pack");
    m.name_category(static_cast<std::uint32_t>(TaskKind::kFixed), "fixed");
    m.name_category(static_cast<std::uint32_t>(TaskKind::kQuantize), "quantize");
    for (const auto& g : c_.cluster().gpus()) {
      // A GPU without NVLink is alone in its domain (Cluster::make), so no transfer crosses its
      // NVLink; it gets no resource, which would have no capacity.
      const bool nvlink = g.nvlink_bandwidth.value > 0;
      links_.nvlink_out.push_back(
          nvlink ? m.add_resource(fmt::format("gpu {} nvlink out", g.id.value), g.nvlink_bandwidth)
                 : ResourceId{});
      links_.nvlink_in.push_back(
          nvlink ? m.add_resource(fmt::format("gpu {} nvlink in", g.id.value), g.nvlink_bandwidth)
                 : ResourceId{});
      links_.copy.push_back(m.add_resource(fmt::format("gpu {} copy", g.id.value), g.copy_bandwidth));
      gpu_track_.push_back(m.add_track(fmt::format("gpu {}", g.id.value)));
    }
    for (const auto& n : c_.cluster().nics()) {
      links_.nic_tx.push_back(m.add_resource(fmt::format("nic {} tx", n.id), n.bandwidth));
      links_.nic_rx.push_back(m.add_resource(fmt::format("nic {} rx", n.id), n.bandwidth));
      nic_track_.push_back(m.add_track(fmt::format("nic {}", n.id)));
    }
    if (c_.cluster().fabric().oversubscription > 1.0)
      for (const auto& d : c_.cluster().domains()) {
        const auto bw =
            c_.cluster().domain_nic_bandwidth(d.id) * (1.0 / c_.cluster().fabric().oversubscription);
        links_.uplink_out.push_back(m.add_resource(fmt::format("domain {} uplink out", d.id), bw));
        links_.uplink_in.push_back(m.add_resource(fmt::format("domain {} uplink in", d.id), bw));
      }
  }

  // A copy engine faster than all the links of its GPU together can never be a bottleneck;
  // leaving it out of the flows keeps the max-min problem small and its components apart.
  void find_binding_copy_engines() {
    std::vector<double> links(c_.cluster().gpus().size(), 0.0);
    for (const auto& g : c_.cluster().gpus()) links[at(g.id.value)] = 2 * g.nvlink_bandwidth.value;
    for (const auto& n : c_.cluster().nics())
      for (auto g : n.gpus) links[at(g.value)] += 2 * n.bandwidth.value;
    for (const auto& g : c_.cluster().gpus())
      copy_can_bind_.push_back(g.copy_bandwidth.value < links[at(g.id.value)]);
  }

  // Each transfer's upstream transfers, once (Transfer::upstream builds a list each call), and
  // which transfers relays start from.
  void index_upstreams() {
    has_pipelined_dependent_.assign(plan_.transfers.size(), false);
    upstream_begin_.assign(1, 0);
    const bool pipelined = !calls_ || !calls_->store_and_forward || calls_->relay_slices > 1;
    for (const auto& t : plan_.transfers) {
      const auto up = t.upstream();
      upstreams_.insert(upstreams_.end(), up.begin(), up.end());
      upstream_begin_.push_back(upstreams_.size());
      // A quantise step starts once all it quantises has landed, and what it made is there at
      // once when it ends: neither side pipelines.
      const bool relay = up.size() == 1 && !t.quantises() && !plan_.transfers[at(up[0])].quantises();
      pipelined_upstream_.push_back(pipelined && relay ? up[0] : -1);
      if (pipelined_upstream_.back() >= 0) has_pipelined_dependent_[at(up[0])] = true;
    }
  }

  // Where each pipelined relay's head and last chunk wait in its upstream, which is cut there.
  [[nodiscard]] Result<void> anchor_relays() {
    anchor_.assign(plan_.transfers.size(), Anchor{});
    anchor_cuts_.assign(plan_.transfers.size(), {});
    for (const auto& t : plan_.transfers) {
      const auto up = pipelined_upstream_[at(t.id)];
      if (up < 0) continue;
      const std::int64_t all = lowered_.layout(t.id).chunks();
      const auto need = [&](std::int64_t chunk) -> Result<std::int64_t> {
        const auto waits = REFIT_TRY(lowered_.waits(t.id, chunk));
        std::int64_t chunks = 1;
        for (const auto& w : waits) chunks = std::max(chunks, w.chunks);
        return chunks;
      };
      auto& a = anchor_[at(t.id)];
      a.head = REFIT_TRY(need(head_chunks(all) - 1));
      a.last = REFIT_TRY(need(all - 1));
      anchor_cuts_[at(up)].push_back(a.head);
      anchor_cuts_[at(up)].push_back(a.last);
    }
    return {};
  }

  // The piece of `transfer` that ends with its chunk `chunks` (it was cut there).
  TaskId piece_through(std::int32_t transfer, std::int64_t chunks) const {
    const auto pieces = pieces_of(transfer);
    return std::ranges::lower_bound(pieces, chunks, {}, &Piece::chunks)->task;
  }

  std::span<const std::int32_t> upstreams_of(std::size_t transfer) const {
    return std::span(upstreams_)
        .subspan(upstream_begin_[transfer], upstream_begin_[transfer + 1] - upstream_begin_[transfer]);
  }

  // The transfers that run, in the order their senders issue them: by call, then plan order.
  void order_transfers() {
    for (const auto& t : plan_.transfers)
      if (!calls_ || call_of_[at(t.id)] >= 0) order_.push_back(t.id);
    if (calls_) std::ranges::stable_sort(order_, {}, [&](std::int32_t t) { return call_of_[at(t)]; });
  }

  // One stream per (sender, receiver) pair of each call queue, and each transfer's grant: where
  // in the pair's earlier transfers the chunk `window` chunks before its first lies. Pairs in
  // order with window 0: streams without grants.
  void plan_streams() {
    stream_.assign(plan_.transfers.size(), -1);
    grant_.assign(plan_.transfers.size(), Grant{});
    cuts_.assign(plan_.transfers.size(), {});
    if (window_ == 0 && !(calls_ && calls_->pairs_in_order)) return;
    const std::int64_t window = window_ > 0 ? window_ : std::numeric_limits<std::int64_t>::max();
    // The transfers grouped by pair and call queue, each pair's in issue order: calls of two
    // queues (two communicators) reach the same peer over connections of their own.
    using PairKey = std::tuple<std::int32_t, std::int32_t, std::int32_t>;  // queue, sender, receiver
    std::vector<std::pair<PairKey, std::int32_t>> by_pair;                 // (pair, position in order_)
    by_pair.reserve(order_.size());
    for (std::size_t i = 0; i < order_.size(); ++i) {
      const auto& t = plan_.transfers[at(order_[i])];
      if (t.quantises()) continue;  // no message
      const std::int32_t queue = calls_ ? calls_->calls[at(call_of_[at(t.id)])].queue : 0;
      by_pair.emplace_back(PairKey{queue, t.sender.value, t.receiver.value}, static_cast<std::int32_t>(i));
    }
    std::ranges::sort(by_pair);
    std::vector<std::int64_t> chunks_end;  // the pair's chunks up to and including its i-th transfer
    for (std::size_t i = 0; i < by_pair.size(); ++i) {
      if (i == 0 || by_pair[i].first != by_pair[i - 1].first) {
        out_.model.add_stream();
        chunks_end.clear();
      }
      const auto id = at(order_[at(by_pair[i].second)]);
      stream_[id] = out_.model.stream_count() - 1;
      const std::int64_t before = chunks_end.empty() ? 0 : chunks_end.back();
      if (before >= window) {
        const std::int64_t granting = before - window;  // counted from 0 in the pair
        const auto k =
            static_cast<std::size_t>(std::ranges::upper_bound(chunks_end, granting) - chunks_end.begin());
        const std::int64_t holder_first = k == 0 ? 0 : chunks_end[k - 1];
        const std::int32_t holder = order_[at(by_pair[i - chunks_end.size() + k].second)];
        grant_[id] = {holder, granting - holder_first + 1};
        cuts_[at(holder)].push_back(grant_[id].chunks);
      }
      chunks_end.push_back(before + lowered_.layout(static_cast<std::int32_t>(id)).chunks());
    }
  }

  std::size_t gpu_index(Rank r) const { return at(c_.gpu_of(r).value); }

  void link_resources(const Transfer& t, bool pack, bool unpack, std::vector<ResourceId>& r) const {
    r.clear();
    const auto s = gpu_index(t.sender), d = gpu_index(t.receiver);
    switch (t.link) {
      case LinkKind::kNetwork:
        if (auto n = c_.nic_of(t.sender)) r.push_back(links_.nic_tx[at(*n)]);
        if (auto n = c_.nic_of(t.receiver)) r.push_back(links_.nic_rx[at(*n)]);
        if (!links_.uplink_out.empty()) {
          r.push_back(links_.uplink_out[at(c_.domain_of(t.sender))]);
          r.push_back(links_.uplink_in[at(c_.domain_of(t.receiver))]);
        }
        break;
      case LinkKind::kNvlink:
        r.push_back(links_.nvlink_out[s]);
        r.push_back(links_.nvlink_in[d]);
        break;
      case LinkKind::kLocal:
        r.push_back(links_.copy[s]);
        break;
    }
    if (pack && copy_can_bind_[s]) r.push_back(links_.copy[s]);
    if (unpack && copy_can_bind_[d]) r.push_back(links_.copy[d]);
  }

  TaskKind kind_of(LinkKind k) const {
    return k == LinkKind::kNetwork  ? TaskKind::kNetwork
           : k == LinkKind::kNvlink ? TaskKind::kNvlink
                                    : TaskKind::kCopy;
  }

  Seconds latency_of(const Transfer& t) const {
    if (t.link != LinkKind::kNetwork) return c_.cluster().nvlink_latency();
    const auto n = c_.nic_of(t.sender);
    return n ? c_.cluster().nics()[at(*n)].latency : c_.cluster().nvlink_latency();
  }

  std::int32_t track_of(const Transfer& t) const {
    if (t.link == LinkKind::kNetwork)
      if (auto n = c_.nic_of(t.sender)) return nic_track_[at(*n)];
    return gpu_track_[gpu_index(t.sender)];
  }

  Seconds copy_time(Bytes bytes, Rank r) const {
    return transfer_time(bytes, c_.cluster().gpu(c_.gpu_of(r)).copy_bandwidth);
  }

  // The chunks a relay forwards at once: one, or a slice of the transfer when relays store and
  // forward slices (calls.h).
  std::int64_t head_chunks(std::int64_t all) const {
    const bool sliced = calls_ && calls_->store_and_forward && calls_->relay_slices > 1;
    return sliced ? (all + calls_->relay_slices - 1) / calls_->relay_slices : 1;
  }

  // Where the transfer is cut, in chunks counted from 1 within it, ending with all its chunks:
  // after its head when relays start from it, before a relay's last head (which waits for the
  // upstream's end), and after every chunk that grants a later transfer of its pair.
  void piece_ends(const Transfer& t, std::vector<std::int64_t>& ends) const {
    const auto id = at(t.id);
    const std::int64_t all = lowered_.layout(t.id).chunks();
    const std::int64_t head = head_chunks(all);
    ends = cuts_[id];
    ends.insert(ends.end(), anchor_cuts_[id].begin(), anchor_cuts_[id].end());
    const bool relay = pipelined_upstream_[id] >= 0;
    if (has_pipelined_dependent_[id] || relay) ends.push_back(head);
    if (relay) ends.push_back(all - head);
    ends.push_back(all);
    std::erase_if(ends, [&](std::int64_t e) { return e < 1 || e > all; });
    std::ranges::sort(ends);
    ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  }

  // What the transfer's first piece waits for: its upstream data (a pipelined relay: the head of
  // its one upstream), its grant, and in a call the call's start and the sender's copy.
  void start_deps(const Transfer& t, std::vector<TaskId>& deps) const {
    const auto id = at(t.id);
    if (quantize_.after_sender[id]) deps.push_back(sender_quantize_[at(t.sender.value)]);
    if (const auto up = pipelined_upstream_[id]; up >= 0)
      deps.push_back(piece_through(up, anchor_[id].head));
    else
      for (const std::int32_t u : upstreams_of(id)) deps.push_back(ends_[at(u)]);
    // The holder was cut after the granting chunk (piece_ends).
    if (const Grant g = grant_[id]; g.holder >= 0) deps.push_back(piece_through(g.holder, g.chunks));
    if (calls_) {
      deps.push_back(call_start_);
      if (const auto copy = copy_task_[at(t.sender.value)]; copy >= 0) deps.push_back(TaskId{copy});
    }
  }

  // A task of `rank`'s GPU that takes `time` and moves no bytes, after `deps`.
  TaskId add_quantize_task(Rank rank, Seconds time, std::vector<TaskId> deps) {
    label_.clear();
    fmt::format_to(std::back_inserter(label_), "quantise on rank {}", rank.value);
    spec_.resources.clear();
    spec_.deps = std::move(deps);
    spec_.track = gpu_track_[gpu_index(rank)];
    spec_.stream = -1;
    return add_call_task(std::string_view(label_.data(), label_.size()), Bytes{0}, time, TaskKind::kQuantize);
  }

  // A landing rank quantises, once all it quantises has landed, the source-dtype elements of the
  // values the step makes (core/quantization.h); relays of them wait for the whole step.
  void add_quantise_step(const Transfer& t) {
    const auto id = at(t.id);
    Bytes source{0};
    for (const auto& s : t.segments)
      if (const auto& q = plan_.tensors[s.tensor].quantization; !q->is_scales())
        source += Bytes{s.box.volume() * dtype_size(q->from)};
    std::vector<TaskId> deps;
    for (const std::int32_t u : upstreams_of(id)) deps.push_back(ends_[at(u)]);
    if (calls_) deps.push_back(call_start_);
    const TaskId task =
        add_quantize_task(t.receiver, quantize_time(source, gpu_of(t.receiver)), std::move(deps));
    out_.transfer_of_task.back() = t.id;
    piece_range_[id].first = pieces_.size();
    pieces_.push_back({lowered_.layout(t.id).chunks(), task});
    piece_range_[id].second = pieces_.size();
    ends_[id] = task;
  }

  void add_sender_quantization() {
    sender_quantize_.assign(at(plan_.world_size()), TaskId{});
    for (std::int32_t r = 0; r < plan_.world_size(); ++r)
      if (const Bytes b = quantize_.sender_bytes[at(r)]; b.value > 0)
        sender_quantize_[at(r)] = add_quantize_task(Rank{r}, quantize_time(b, gpu_of(Rank{r})), {});
  }

  void add_receiver_quantization() {
    std::vector<std::vector<TaskId>> landed(at(plan_.world_size()));
    for (const std::int32_t t : order_)
      if (quantize_.before_receiver[at(t)])
        landed[at(plan_.transfers[at(t)].receiver.value)].push_back(ends_[at(t)]);
    for (std::int32_t r = 0; r < plan_.world_size(); ++r)
      if (const Bytes b = quantize_.receiver_bytes[at(r)]; b.value > 0)
        add_quantize_task(Rank{r}, quantize_time(b, gpu_of(Rank{r})), std::move(landed[at(r)]));
  }

  const GpuSpec& gpu_of(Rank r) const { return c_.cluster().gpu(c_.gpu_of(r)); }

  std::span<const Piece> pieces_of(std::int32_t transfer) const {
    const auto [first, last] = piece_range_[at(transfer)];
    return std::span(pieces_).subspan(first, last - first);
  }

  // Builds the transfer's pieces in spec_, whose vectors keep their capacity from one task to
  // the next: a DeepSeek-V3 plan has 10^5 transfers.
  void add_transfer(const Transfer& t) {
    if (t.quantises()) return add_quantise_step(t);
    const auto id = at(t.id);
    const auto& cost = costs_[id];
    const bool pack = cost.packs;
    const bool unpack = cost.unpacks;
    label_.clear();
    fmt::format_to(std::back_inserter(label_), "#{} {}->{}", t.id, t.sender.value, t.receiver.value);
    link_resources(t, pack, unpack, spec_.resources);
    spec_.track = track_of(t);
    spec_.category = static_cast<std::uint32_t>(kind_of(t.link));
    spec_.label = std::string_view(label_.data(), label_.size());
    spec_.stream = stream_[id];
    add_pieces(t, copy_time(cost.pack_first, t.sender));
    piece_range_[id].second = pieces_.size();
    ends_[id] = pieces_.back().task;
    if (unpack) {
      const Seconds unpack_time = copy_time(cost.unpack_last, t.receiver);
      spec_.bytes = Bytes{0};
      spec_.latency = unpack_time;
      spec_.resources.clear();
      spec_.deps.assign(1, ends_[id]);
      spec_.stream = -1;
      ends_[id] = add_task(t.id, unpack_time);
    }
  }

  void add_pieces(const Transfer& t, Seconds pack_time) {
    const auto id = at(t.id);
    const auto upstream = pipelined_upstream_[id];
    piece_ends(t, ends_scratch_);
    std::int64_t done = 0;
    piece_range_[id].first = pieces_.size();
    for (const std::int64_t e : ends_scratch_) {
      const bool first = done == 0;
      const bool last = e == ends_scratch_.back();
      const std::int64_t through = lowered_.layout(t.id).chunk_end(e - 1);
      spec_.deps.clear();
      if (first) start_deps(t, spec_.deps);
      // In a stream the pieces follow each other anyway; a dependency would make the next piece
      // start a flow of its own instead of taking over the stream's.
      if (!first && stream_[id] < 0) spec_.deps.push_back(pieces_.back().task);
      if (last && upstream >= 0) spec_.deps.push_back(last_wait(upstream, anchor_[id].last));
      spec_.bytes = Bytes{through - done};
      spec_.latency = first ? latency_of(t) + pack_time : Seconds{0};
      pieces_.push_back({e, add_task(t.id, first ? pack_time : Seconds{0})});
      done = through;
    }
  }

  // What a relay's last chunk waits for: the upstream's end (after its unpacking) when it needs
  // all of it, else the upstream's piece through the chunk it needs.
  TaskId last_wait(std::int32_t upstream, std::int64_t chunks) const {
    if (chunks >= lowered_.layout(upstream).chunks()) return ends_[at(upstream)];
    return piece_through(upstream, chunks);
  }

  TaskId add_task(std::int32_t transfer, Seconds copy) {
    out_.transfer_of_task.push_back(transfer);
    out_.call_of_task.push_back(transfer >= 0 && calls_ ? call_of_[at(transfer)] : current_call_);
    out_.copy_latency.push_back(copy);
    return out_.model.add_task(spec_);
  }

  // A task of the current call that is not a transfer: its start, end, copies and collective.
  TaskId add_call_task(std::string_view label, Bytes bytes, Seconds latency, TaskKind kind) {
    spec_.bytes = bytes;
    spec_.latency = latency;
    spec_.category = static_cast<std::uint32_t>(kind);
    spec_.label = label;
    spec_.stream = -1;
    return add_task(-1, Seconds{0});
  }

  std::int32_t queue_track(std::int32_t queue) {
    if (at(queue) >= queue_track_.size()) queue_track_.resize(at(queue) + 1, -1);
    auto& track = queue_track_[at(queue)];
    if (track < 0) track = out_.model.add_track(fmt::format("queue {}", queue));
    return track;
  }

  void add_call(std::int32_t index) {
    const Call& call = calls_->calls[at(index)];
    current_call_ = index;
    call_ends_.clear();
    spec_.track = queue_track(call.queue);
    spec_.resources.clear();
    spec_.deps.clear();
    if (at(call.queue) < queue_last_.size() && queue_last_[at(call.queue)] >= 0)
      spec_.deps.push_back(TaskId{queue_last_[at(call.queue)]});
    for (const std::int32_t a : call.after) spec_.deps.push_back(call_end_[at(a)]);
    call_start_ = add_call_task(call.label, Bytes{0}, call.launch, TaskKind::kFixed);
    add_copies(call.copies_before, call.label, {call_start_});
    for (const std::int32_t t : order_range(index)) {
      add_transfer(plan_.transfers[at(t)]);
      call_ends_.push_back(ends_[at(t)]);
    }
    if (call.collective) add_collective(*call.collective, call.label);
    for (const auto& c : call.copies_before) copy_task_[at(c.rank.value)] = -1;
    add_copies_after(call, index);
    spec_.track = queue_track(call.queue);
    spec_.resources.clear();
    spec_.deps = call_ends_;
    spec_.deps.push_back(call_start_);
    call_end_.push_back(add_call_task(call.label, Bytes{0}, call.finish, TaskKind::kFixed));
    if (at(call.queue) >= queue_last_.size()) queue_last_.resize(at(call.queue) + 1, -1);
    queue_last_[at(call.queue)] = call_end_.back().value;
  }

  // The call's transfers in order_ (sorted by call, so one range).
  std::span<const std::int32_t> order_range(std::int32_t call) const {
    const auto first =
        std::ranges::lower_bound(order_, call, {}, [&](std::int32_t t) { return call_of_[at(t)]; });
    const auto last =
        std::ranges::upper_bound(order_, call, {}, [&](std::int32_t t) { return call_of_[at(t)]; });
    return {first, last};
  }

  // Copies before the call's bytes: each rank's after the call's start; they gate its sends.
  void add_copies(const std::vector<RankCopy>& copies, std::string_view label, std::vector<TaskId> deps) {
    for (const auto& c : copies) {
      spec_.resources.assign(1, links_.copy[gpu_index(c.rank)]);
      spec_.deps = deps;
      spec_.track = gpu_track_[gpu_index(c.rank)];
      copy_task_[at(c.rank.value)] = add_call_task(label, c.bytes, Seconds{0}, TaskKind::kPack).value;
    }
  }

  // Copies after the call's bytes: each rank's once all it receives in the call has landed.
  void add_copies_after(const Call& call, std::int32_t index) {
    if (call.copies_after.empty()) return;
    std::vector<std::vector<TaskId>> received(at(plan_.world_size()));
    for (const std::int32_t t : order_range(index))
      received[at(plan_.transfers[at(t)].receiver.value)].push_back(ends_[at(t)]);
    const std::vector<TaskId> collective = call.collective ? call_ends_ : std::vector<TaskId>{};
    for (const auto& c : call.copies_after) {
      spec_.resources.assign(1, links_.copy[gpu_index(c.rank)]);
      spec_.deps = call.collective ? collective : received[at(c.rank.value)];
      spec_.deps.push_back(call_start_);
      spec_.track = gpu_track_[gpu_index(c.rank)];
      call_ends_.push_back(add_call_task(call.label, c.bytes, Seconds{0}, TaskKind::kPack));
    }
  }

  void add_collective(const Collective& collective, std::string_view label) {
    const auto flows = collective_flows(collective, c_, links_);
    std::vector<TaskId> deps{call_start_};
    for (const Rank r : collective.ranks)
      if (const auto copy = copy_task_[at(r.value)]; copy >= 0) deps.push_back(TaskId{copy});
    spec_.track = gpu_track_[gpu_index(collective.ranks.front())];
    for (const auto& channel : flows.channels) {
      spec_.resources = channel.resources;
      spec_.deps = deps;
      call_ends_.push_back(add_call_task(label, channel.bytes, collective.latency,
                                         flows.crosses_network ? TaskKind::kNetwork : TaskKind::kNvlink));
    }
  }

  const Plan& plan_;
  const lowering::LoweredPlan& lowered_;
  std::vector<lowering::TransferCopyCost> costs_;  // per transfer
  const PlacedCluster& c_;
  const CallSchedule* calls_;
  std::vector<std::int32_t> call_of_;  // per transfer: its call, -1 for none (without a schedule: empty)
  PlanModel out_;
  LinkResources links_;
  std::vector<std::int32_t> gpu_track_, nic_track_, queue_track_;
  std::vector<bool> has_pipelined_dependent_;
  std::vector<bool> copy_can_bind_;               // per GPU
  std::vector<std::int32_t> upstreams_;           // of every transfer, in order (Transfer::upstream)
  std::vector<std::size_t> upstream_begin_;       // per transfer + 1: its first upstream
  std::vector<std::int32_t> pipelined_upstream_;  // per transfer: the one upstream it pipelines from, or -1
  std::vector<std::int32_t> order_;               // the transfers that run, in issue order
  std::vector<std::int32_t> stream_;              // per transfer; -1 with window 0
  std::vector<Grant> grant_;                      // per transfer
  std::vector<std::vector<std::int64_t>> cuts_;   // per transfer: chunks that grant others
  std::vector<Anchor> anchor_;                    // per transfer: where a pipelined relay waits
  std::vector<std::vector<std::int64_t>> anchor_cuts_;            // per transfer: chunks relays wait for
  std::vector<Piece> pieces_;                                     // of all transfers, in order
  std::vector<std::pair<std::size_t, std::size_t>> piece_range_;  // per transfer: its pieces
  TaskSpec spec_;                                                 // scratch of add_transfer()
  std::vector<std::int64_t> ends_scratch_;
  fmt::memory_buffer label_;
  std::vector<TaskId> ends_;  // per transfer: the task after which its data is in place
  std::int64_t window_;       // chunks granted ahead per pair; 0: no limit
  QuantizeWork quantize_;
  std::vector<TaskId> sender_quantize_;  // per rank: its quantisation before sending, if any
  // Calls: the current one, its start, what its end waits for; per call its end; per queue its
  // last call's end; per rank its copy before the current call's sends (-1: none).
  std::int32_t current_call_ = -1;
  TaskId call_start_;
  std::vector<TaskId> call_ends_;
  std::vector<TaskId> call_end_;
  std::vector<std::int32_t> queue_last_;
  std::vector<std::int32_t> copy_task_;
};

// The plan restricted to the transfers some call moves, renumbered, with the schedule pointing
// at the new numbers; `original` maps them back. Transfers no call moves are not run, so they are
// not lowered either: NeMo RL's gather-broadcast moves nothing through its plan, whose 10^7
// chunks would otherwise take minutes and gigabytes to lower.
struct CalledPart {
  Plan plan;
  CallSchedule schedule;
  std::vector<std::int32_t> original;
};

CalledPart called_part(const Plan& plan, const CallSchedule& schedule,
                       const std::vector<std::int32_t>& call_of) {
  CalledPart out{.plan = Plan{.strategy = plan.strategy,
                              .execution = plan.execution,
                              .tensors = plan.tensors,
                              .source_ranks = plan.source_ranks,
                              .destination_ranks = plan.destination_ranks,
                              .transfers = {}},
                 .schedule = schedule,
                 .original = {}};
  std::vector<std::int32_t> renumbered(plan.transfers.size(), -1);
  for (const auto& t : plan.transfers) {
    if (call_of[at(t.id)] < 0) continue;
    renumbered[at(t.id)] = static_cast<std::int32_t>(out.plan.transfers.size());
    out.original.push_back(t.id);
    Transfer& copy = out.plan.transfers.emplace_back(t);
    copy.id = renumbered[at(t.id)];
    for (auto& s : copy.segments)
      if (s.via != kFromSourceShard) s.via = renumbered[at(s.via)];
  }
  for (auto& call : out.schedule.calls)
    for (auto& t : call.transfers) t = renumbered[at(t)];
  return out;
}

// NVLink transfers only between GPUs that have NVLink: a cluster may give a GPU none (0 GB/s),
// which only a GPU alone in its domain can do without.
Result<void> check_nvlink(const Plan& plan, const PlacedCluster& cluster) {
  for (const Transfer& t : plan.transfers) {
    if (t.link != LinkKind::kNvlink) continue;
    for (const Rank r : {t.sender, t.receiver})
      if (const auto g = cluster.gpu_of(r); cluster.cluster().gpu(g).nvlink_bandwidth.value <= 0)
        return invalid(
            fmt::format("transfer #{} crosses NVLink, but GPU {} (rank {}) has none (nvlink_gbps 0 "
                        "in its domain of several GPUs): a GPU without NVLink is a domain of its own",
                        t.id, g.value, r.value));
  }
  return {};
}

Result<PlanModel> build_called(const Plan& plan, const ReshardProblem& problem, const PlacedCluster& cluster,
                               const ExecutionModel& execution, const PlanModelOptions& options,
                               std::vector<std::int32_t> call_of) {
  const auto lowered = REFIT_TRY(lowering::LoweredPlan::make(plan, options.staging));
  auto costs = REFIT_TRY(lowering::copy_costs(lowered, problem, execution.zero_copy));
  return Builder(plan, lowered, std::move(costs), cluster, options, std::move(call_of),
                 quantize_work(plan, problem))
      .build();
}

}  // namespace

Result<PlanModel> build_plan_model(const Plan& plan, const ReshardProblem& problem,
                                   const PlacedCluster& cluster, const ExecutionModel& execution,
                                   const PlanModelOptions& options) {
  if (options.window < 0)
    return out_of_range(fmt::format("window must be >= 0 chunks, got {}", options.window));
  REFIT_TRY(check_nvlink(plan, cluster));
  if (!options.calls) return build_called(plan, problem, cluster, execution, options, {});
  auto call_of = REFIT_TRY(call_of_each_transfer(plan, *options.calls));
  if (std::ranges::none_of(call_of, [](std::int32_t c) { return c < 0; }))
    return build_called(plan, problem, cluster, execution, options, std::move(call_of));
  const CalledPart part = called_part(plan, *options.calls, call_of);
  PlanModelOptions part_options = options;
  part_options.calls = &part.schedule;
  auto part_call_of = REFIT_TRY(call_of_each_transfer(part.plan, part.schedule));
  auto model =
      REFIT_TRY(build_called(part.plan, problem, cluster, execution, part_options, std::move(part_call_of)));
  for (auto& t : model.transfer_of_task)
    if (t >= 0) t = part.original[at(t)];
  return model;
}

}  // namespace refit::sim
