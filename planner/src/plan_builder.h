#pragma once
// Accumulates the segments a strategy decides to move into coalesced transfers, and lays them
// out in plan order. Strategies speak in "phases": a transfer of phase k may forward data of
// transfers of earlier phases only, so ordering by phase keeps every `via` earlier in the plan.
// Inside a phase, senders walk their receivers as a rotated all-to-all (see finish()).
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "refit/core/problem.h"
#include "refit/planner/plan.h"
#include "refit/planner/strategy.h"
#include "refit/topology/rank_map.h"
#include "upstream_segments.h"

namespace refit::planner_detail {

// A transfer while the plan is being built; its final id is assigned by finish().
using Handle = std::int32_t;

class PlanBuilder {
 public:
  PlanBuilder(const ReshardProblem& problem, const PlacedCluster& cluster, const StrategyInfo& strategy,
              Bytes chunk);

  // Appends a segment to the message from `from` to `to` identified by (phase, key): segments
  // with equal (phase, key, from, to) travel in one message. `via` is the handle of the message
  // that brought the box to `from`, or kFromSourceShard. Returns the message's handle.
  Handle add(std::uint32_t phase, std::uint64_t key, Rank from, Rank to, std::uint32_t tensor, Box box,
             Handle via = kFromSourceShard);

  // Messages so far: sender, receiver and bytes, by handle (strategies balance on them).
  Rank receiver(Handle h) const { return pending_[static_cast<std::size_t>(h)].to; }
  const PlacedCluster& cluster() const { return cluster_; }

  // A pair's relay messages in the order they were made, or in the order their data lands at the
  // sender: a pair's stream stops at a relay whose data has not all arrived, so a relay of a
  // message that lands late holds up every relay behind it, already landed or not. With
  // kArrival a relay message is also cut into slices of about kRelaySliceChunks chunks (its
  // segments into row slabs where they are larger), each placed by when its own data lands, its
  // last kRelaySliceChunks chunks one a slice: two large messages landing at once on one GPU then
  // have their relays interleaved on each pair, instead of the second waiting for all of the
  // first, and a GPU relaying the data of many messages that all land at the end waits for no
  // more than a chunk of each. A relay that others forward from is cut too (their relays then
  // read its slices): a domain that forwards what several training GPUs send it to other domains
  // otherwise forwards one of them at a time, at that sender's share of its NIC. The order a
  // deployed system relays in is its own; the arrival order is for plans run as one call.
  enum class RelayOrder : std::uint8_t { kCreation, kArrival };
  // Smaller slices make more transfers, each paying its latency in its pair's stream (one chunk
  // a slice throughout: Qwen3-30B-A3B EP8xDP16 -> 8 x TP2 in bf16 took 1.09x its bound instead of
  // 1.02x); bench/RESULTS.md has the measurements.
  static constexpr std::int64_t kRelaySliceChunks = 4;
  // What others forward goes in chunks of at least 1/kForwardedChunks of its pair's bytes, and
  // of no less than kMinForwardedChunk bytes (chunks() says why).
  static constexpr std::int64_t kForwardedChunks = 32;
  static constexpr std::int64_t kMinForwardedChunk = 1 << 20;
  // With `rounds`, also each transfer's place in the rotated all-to-all: phase << 32 | round. A
  // sender has one transfer per (phase, round), and plan order is by (phase, round, sender):
  // plans of parts that share no rank merge into the plan of their union by it.
  Plan finish(RelayOrder relays = RelayOrder::kCreation, std::vector<std::uint64_t>* rounds = nullptr) &&;

 private:
  struct Pending {
    std::uint32_t phase;
    Rank from;
    Rank to;
    std::uint64_t key;  // add()'s
    Bytes bytes;
    std::vector<Segment> segments;  // via holds handles until finish()
    // Segments with a `via`: the passes over relays skip the other messages without reading
    // their segments (most of a plan's bytes, which would be fetched from memory each pass).
    std::size_t relays = 0;
  };
  struct Key {
    std::uint32_t phase;
    std::uint64_t key;
    std::int32_t from;
    std::int32_t to;
    bool operator==(const Key&) const = default;
  };
  // Handles by key, in one array probed linearly: a node-based hash map costs an allocation and
  // a pointer chase per message, and plans have up to millions of them.
  class MessageIndex {
   public:
    // The handle of `key` (key_of(h) gives a stored handle's key), or `fresh` once it is stored
    // for it; and whether it was stored.
    template <class KeyOf>
    std::pair<Handle, bool> find_or_add(const Key& key, Handle fresh, const KeyOf& key_of);

   private:
    // A slot keeps the top 32 bits of its key's hash, which place it and tell keys apart without
    // reading their message: 8 bytes a slot instead of the 32 of one holding the key, so that the
    // table stays in cache far longer.
    struct Slot {
      std::uint32_t tag = 0;
      Handle handle = -1;  // -1: empty
    };
    static std::uint32_t tag_of(const Key& k);
    std::size_t slot_of(std::uint32_t tag) const { return tag >> shift_; }
    void grow();
    std::vector<Slot> slots_;  // a power of two of them (at most 2^32), at most half full
    std::size_t size_ = 0;
    int shift_ = 32;  // 32 - log2(slots)
  };

  // Plan order: phase by phase, each phase a rotated all-to-all of its pairs, a pair's messages
  // by `arrival` of their data at the sender, then by `lead` (when given; leads()), then in the
  // order they were made: what a relay passes on leads its pair's stream, so the relay can start
  // while the rest of what the pair carries only lands. The rotation may wrap a pair's last
  // messages in front of its first unless `keep_pair_order`: the baselines' plans keep the order
  // their predictions were made with (their deployments order a pair's messages by call first).
  // With `rounds`, each place's phase << 32 | round (finish()).
  std::vector<Handle> rotated_order(std::span<const std::int64_t> arrival, std::span<const std::uint8_t> lead,
                                    bool keep_pair_order, std::vector<std::uint64_t>* rounds = nullptr) const;
  // A number per segment of some messages, in one array (message h's at [first[h], first[h + 1])).
  class PerSegment {
   public:
    // Room for `counts[h]` numbers of message h, each 0.
    explicit PerSegment(std::span<const std::size_t> counts);
    std::span<std::int64_t> of(Handle h);
    std::span<const std::int64_t> of(Handle h) const;

   private:
    std::vector<std::int64_t> values_;
    std::vector<std::size_t> first_;
  };
  // Each message's (sender, receiver) pair as a dense number and its bytes, read in handle order:
  // the passes in plan order then index these small arrays instead of fetching every message
  // from wherever it lies in memory.
  struct Streams {
    std::vector<std::uint32_t> pair;
    std::vector<std::int64_t> bytes;
    std::size_t pairs = 0;
  };
  Streams streams() const;
  // By handle, where a message goes among its pair's messages whose data lands together: first
  // those a network message forwards from (what other domains wait for, over their slowest
  // links), then those only NVLink or local copies forward from, then the others.
  enum Lead : std::uint8_t { kFeedsNetwork, kFeedsNvlink, kFeedsNothing };
  std::vector<std::uint8_t> leads() const;
  // By handle, the chunk of each message. A message others forward from is cut into at least
  // kForwardedChunks chunks of its pair's bytes, and a relay into chunks no larger than those it
  // forwards: a relay's chunk waits for the chunks it forwards, and a sender that shares its
  // links among its pairs by their bytes (the UCX executor's pacing) delivers a pair's first
  // chunk only once (chunk / pair's bytes) of all it sends has gone. A source domain scattering
  // to 15 forwarding domains through ~100 pairs a NIC of 15-25 MB each delivered the first 8 MiB
  // half-way through its sending, and the forwarders waited for it. None goes below
  // kMinForwardedChunk (at 50 GB/s a 1 MiB chunk takes 21 us, above a message's latency), nor
  // above the plan's chunk. A pair's grant window counts chunks, so smaller chunks also hold
  // fewer bytes in flight (bench/RESULTS.md: one problem of 60 went 1.8 % slower, 12 up to 4 %
  // faster). `order`: the plan order (each `via` before its relays).
  std::vector<Bytes> chunks(std::span<const std::uint8_t> leads, std::span<const Handle> order) const;
  // Messages some segment forwards from (their `via`), by handle, from their leads.
  static std::vector<bool> forwarded(std::span<const std::uint8_t> leads);
  // The segments of the messages that others forward from (`forwarded`), indexed for relays.
  UpstreamSegments upstream_segments(const std::vector<bool>& forwarded) const;
  // Per segment of each message, when its data has reached the message's sender: the bytes its
  // upstream's pair carries up to the end of the upstream segment holding it, in `order` (0 for
  // data from source shards).
  PerSegment segment_arrivals(std::span<const Handle> order, const std::vector<bool>& forwarded,
                              const UpstreamSegments& upstream_segments) const;
  // Per message, when all its data has reached its sender: the latest of its segments'.
  std::vector<std::int64_t> latest(const PerSegment& arrival) const;
  // Whether relay message h is cut into slices: it only relays, and it is larger than a slice.
  bool sliced(Handle h) const;
  // Cuts the segments of sliced messages that are larger than a slice into row slabs of about a
  // slice each: a slab lands when its own last byte does, not with the rest of its segment, so
  // the slabs of a large segment landing late take their places among the pair's other relays
  // instead of all waiting for its end. Relays of a cut message are cut along its slabs.
  void cut_relay_segments();
  // Cuts each segment of a relay reading a message marked in `cut` along that message's
  // segments, until every relay segment lies in one segment of what it reads.
  void cut_along_upstreams(std::vector<bool> cut);
  // Puts the segments of every relay message that is not cut into slices in the order their data
  // reaches its sender (stably): a pair is an in-order stream, so a segment that lands last but
  // goes first holds up everything behind it (a relay's lm_head landing at the end of its upstream
  // once held back a whole forwarded message).
  void order_relays_by_arrival(const PerSegment& arrival);
  // Per message, the longest chain of messages its data came through before it (0: a message
  // that relays nothing; 1: a relay of such a message).
  std::vector<std::size_t> forwarding_depths() const;
  // A segment of message `message` that relays data.
  struct RelayRef {
    Handle message;
    std::size_t segment;
  };
  Segment& relay_segment(RelayRef r) {
    return pending_[static_cast<std::size_t>(r.message)].segments[r.segment];
  }
  // Whether some message of forwarding depth `level` is cut into slices.
  bool sliced_at(std::span<const std::size_t> depth, std::size_t level) const;
  // Per sliced message of forwarding depth `level`, the relay segments that read it.
  std::vector<std::vector<RelayRef>> relays_of_sliced(std::span<const std::size_t> depth,
                                                      std::size_t level) const;
  // Cuts the sliced messages of forwarding depth `level` into slices of consecutive segments
  // (sorted by arrival) of at least kRelaySliceChunks chunks, each slice of that depth too, and
  // points each relay of a cut message at the slice holding its data (`upstream_segments` says
  // which segment of the message does); returns each message's arrival, the latest of its
  // segments'. The slices of one depth move their relays' data in their pairs' streams, so a
  // depth is cut once the arrivals of the one before it have been taken again.
  std::vector<std::int64_t> slice_relays(const PerSegment& arrival, const UpstreamSegments& upstream_segments,
                                         std::vector<std::size_t>& depth, std::size_t level);
  // Cuts message h into slices (h keeps the first, new messages take the others), its segments
  // in the order `at` says they land; sets each slice's arrival in `latest` (grown with the new
  // ones) and returns the slice each of h's segments went to.
  std::vector<Handle> slice_message(Handle h, std::span<const std::int64_t> at,
                                    std::vector<std::int64_t>& latest);
  std::int64_t box_bytes(const Segment& s) const {
    return s.box.volume() * dtype_size(problem_.tensors()[s.tensor].tensor.dtype);
  }

  const ReshardProblem& problem_;
  const PlacedCluster& cluster_;
  const StrategyInfo& strategy_;
  Bytes chunk_;
  std::vector<Pending> pending_;
  MessageIndex index_;
};

}  // namespace refit::planner_detail
