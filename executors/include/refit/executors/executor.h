#pragma once
// The executor contract: one executor per process; each rank runs its own part of a Plan.
//
// Buffers: a rank's local data of a tensor is its box of that tensor, row-major and contiguous,
// or, when a side passes a framework's parameters, strided regions of those (fused weights,
// stacked experts, padded vocab: models/storage_map.h), read and written where they lie.
// A training rank passes its source shards, an inference rank its destination shards. Data a rank
// must forward (a relay) but that lies outside its own destination box is kept by the executor in
// scratch memory of its own (only gather-broadcast plans need that); staging for packing strided
// boxes is bounded by ExecutorOptions::staging.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "refit/core/box.h"
#include "refit/core/error.h"
#include "refit/core/units.h"
#include "refit/executors/membership.h"
#include "refit/lowering/lowered_plan.h"
#include "refit/lowering/rank_program.h"
#include "refit/planner/plan.h"

namespace refit {

enum class MemoryKind : std::uint8_t { kHost, kCuda };

struct ShardBuffer {
  std::uint32_t tensor = 0;    // index into Plan::tensors
  Box box;                     // the rank's box of that tensor, in global coordinates
  std::span<std::byte> bytes;  // box.volume() * dtype size bytes, row-major; empty with regions
  // Where the box lies in the side's parameters (Region::buffer indexes them); empty: in `bytes`.
  std::vector<lowering::Region> regions;
};

struct RankBuffers {
  MemoryKind memory = MemoryKind::kHost;
  std::vector<ShardBuffer> sources;       // what this rank holds (training ranks)
  std::vector<ShardBuffer> destinations;  // what this rank must end up holding (inference ranks)
  // A framework's parameters on each side, which the shards' regions point into. A side either
  // has parameters and every shard of it regions, or neither.
  std::vector<std::span<std::byte>> source_parameters;
  std::vector<std::span<std::byte>> destination_parameters;
};

struct ExecutorOptions {
  Seconds timeout{60.0};  // no wait on a peer lasts longer; then every rank fails (at most kMaxTimeout)
  // Per rank, for packing strided pieces; it also sets the chunks (at most half of it), so every
  // rank of a refit must use the same.
  Bytes staging = lowering::kDefaultStaging;
  // Where a peer's memory is mapped into this process (same-host shared memory), put by storing
  // into it directly (non-temporal stores on x86-64); false: every put goes through the transport.
  bool direct_stores = true;
  // Observes the transfer as it goes (progress display; fault injection in tests). Called on the
  // executing thread once a chunk this rank sent has been put and announced to its receiver.
  std::function<void(std::int32_t transfer, std::int64_t chunk)> on_chunk_sent;
  // Asked on the executing thread while it waits, at most kInterruptPoll apart
  // (interrupt_check.h): true ends the execution, this rank failing with "interrupted" and its
  // peers learning it at once (Ctrl-C in a Python job, which would otherwise wait out the
  // timeout); the UCX executor tells them, the NCCL executor aborts its communicator.
  std::function<bool()> interrupted;
  // Where a transport library's warnings and errors go, a line each (the UCX executor: UCX's,
  // which it would otherwise print on stdout, where a caller may be reading results); unset: the
  // library prints them as it does. Process-wide: the latest executor given one sets it.
  std::function<void(std::string_view)> on_transport_message;
};

// How often ExecutorOptions::interrupted is asked while a rank waits.
inline constexpr std::chrono::milliseconds kInterruptPoll{100};

// The longest timeout an executor takes: 10^6 s (11.6 days). Clocks count nanoseconds in 64 bits,
// so a deadline much further away (292 years) would wrap, and "inf" would make every wait fail
// at once.
inline constexpr Seconds kMaxTimeout{1e6};
// The shortest: a wait bounded below a tenth of a second takes a live peer that the scheduler set
// aside for an instant for gone, and is far more likely a unit slip (milliseconds for seconds)
// than a wish.
inline constexpr Seconds kMinTimeout{0.1};

// A timeout in [kMinTimeout, kMaxTimeout] and a staging of at least lowering::kMinStaging, or an error naming
// the option.
[[nodiscard]] Result<void> check_options(const ExecutorOptions& options);

struct ExecutorCapabilities {
  bool host_memory = false;
  bool cuda_memory = false;
  // It quantizes the weights a plan quantizes at the senders itself (sender_quantization.h), so
  // QuantizingExecutor passes such plans straight through.
  bool quantizes_at_senders = false;
};

// Seconds a rank spent working in one execute(), on its own clock, by kind; the rest of its time
// it waited (for grants, data, its peers' end). A kind an executor does not time stays unset.
struct WorkTimes {
  // Putting chunks to their receivers, by the plan's link kind of their transfer (LinkKind):
  // stores into memory mapped here, or posting a transport's put (whose completion is not timed).
  std::optional<std::array<Seconds, kLinkKinds>> puts;
  std::optional<Seconds> pack_unpack;  // copying strided pieces into and out of staging
  std::optional<Seconds> quantize;     // quantizing weights (and their scales) to FP8
};

// What one step of a delta refit did on this rank (DeltaExecutor, delta_executor.h).
struct DeltaStepReport {
  Bytes dense_bytes;           // what the plan's pieces this rank sends weigh: what a full refit sends
  std::int64_t pieces = 0;     // pieces this rank sends (a segment of a transfer)
  std::int64_t unchanged = 0;  // of them, with no element changed: nothing sent
  std::int64_t full = 0;       // of them, sent dense: no baseline both ends agree on (the first
                               // step, a failed step, a receiver whose bytes changed outside refit)
  Seconds encode;              // packing and encoding the pieces this rank sends
  Seconds decode;              // decoding and unpacking the pieces this rank receives
  Seconds exchange;            // auditing the received pieces' bytes, agreeing on checksums and
                               // sizes (waiting there for the slowest sender's encoding),
                               // preparing this step's transfers
  // Re-balancing by the bytes that move (DeltaRebalance), the same on every rank: how far this
  // step's payload shares over the tensors lay from those its plan was balanced for (a
  // total-variation distance in [0, 1]), whether every rank then re-planned by this step's
  // payloads into another plan (the next step runs it), and how long re-planning took. No drift
  // where no re-balancing was asked for (a plan from a file, which nothing re-makes).
  std::optional<double> share_drift;
  bool rebalanced = false;
  Seconds rebalance;
};

struct ExecutionReport {
  Bytes bytes_sent;
  Bytes bytes_received;
  Seconds elapsed;  // from the first byte posted to the last byte landed, on this rank
  std::int64_t messages = 0;
  Bytes stored_directly;  // of bytes_sent, stored into mapped peer memory (direct_stores)
  WorkTimes work;
  std::optional<DeltaStepReport> delta;  // a delta refit's step: bytes_sent are the payloads
  // With a membership set (elastic refit): the same on every rank; bytes and messages then count
  // the transfers this rank completed, not those dropped, and those of a repair step (which re-feeds
  // engines whose data came through a rank that went; elapsed then runs to its end).
  std::optional<EngineOutcomes> engines;
};

// Host memory allocated by an executor (or from the heap); its bytes stay valid while it lives.
// It may outlive neither the executor's process-wide state nor be shared between processes.
class HostAllocation {
 public:
  virtual ~HostAllocation() = default;
  virtual std::span<std::byte> bytes() const = 0;
};

// Plain heap memory, uninitialised: what executors without a faster kind of memory hand out.
std::unique_ptr<HostAllocation> heap_allocation(Bytes bytes);

// Work on what a rank sends that has to be done before it goes and that an executor in front of
// another does (QuantizingExecutor quantizes the weight boxes a transfer reads): an executor that
// takes a gate (Executor::set_send_gate) calls it on the executing thread, so that the work runs
// piece by piece while earlier pieces are on the wire rather than all before the first byte.
class SendGate {
 public:
  virtual ~SendGate() = default;
  // Before chunk `chunk` of the prepared plan's transfer `transfer`, which this rank sends, is
  // packed or put.
  virtual void before_send(std::int32_t transfer, std::int64_t chunk) = 0;
  // Before this rank sends anything that is not one of the prepared plan's transfers as planned
  // (an elastic refit's repair step, which sends from the same buffers).
  virtual void before_any_send() = 0;
};

// What prepare() registered and exchanged; opaque outside the executor that made it.
class PreparedPlan {
 public:
  virtual ~PreparedPlan() = default;
};

// One plan rank's buffers, for a process that runs several plan ranks (Executor::prepare_ranks).
struct LocalRankBuffers {
  Rank rank;
  RankBuffers buffers;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string_view name() const = 0;
  virtual ExecutorCapabilities capabilities() const = 0;
  // Host memory this executor moves fastest, uninitialised: a transport may hand out memory its
  // peers can map and write into directly (no work for the receiving rank, no kernel copy).
  // Buffers carved from it are passed to prepare() like any others. Refuses (kOutOfRange) a
  // negative size, and one beyond the host's physical memory, which would otherwise end in the
  // kernel killing the process, with UCX's shared-memory file left behind holding the memory.
  [[nodiscard]] Result<std::unique_ptr<HostAllocation>> allocate_host(Bytes bytes);
  // Registers memory and exchanges keys with the peers. Refuses buffers that do not match the
  // plan (missing tensor, wrong box, too small), and ranks that disagree on the plan hash, before
  // any byte moves.
  [[nodiscard]] virtual Result<std::unique_ptr<PreparedPlan>> prepare(const Plan& plan, Rank rank,
                                                                      const RankBuffers& buffers) = 0;
  // For a process that runs several plan ranks (all of a plan on one GPU, or training and inference
  // ranks sharing one): prepare() of all of them at once. Executors that run one plan rank per
  // process refuse (kUnsupported).
  [[nodiscard]] virtual Result<std::unique_ptr<PreparedPlan>> prepare_ranks(
      const Plan& plan, std::span<const LocalRankBuffers> ranks) {
    (void)plan;
    (void)ranks;
    return unsupported("prepare_ranks: the " + std::string(name()) +
                       " executor runs one plan rank per process");
  }
  // Moves the bytes. Bounded: a dead peer or a timeout gives an error naming the rank and tensor.
  [[nodiscard]] virtual Result<ExecutionReport> execute(PreparedPlan& prepared) = 0;
  // Elastic refit (membership.h): the executions that follow run over the member engines only,
  // an engine whose rank dies misses its step without failing the others, and peers of another
  // epoch are fenced out. The prepared plans are kept: a change costs no new prepare. Executors
  // that cannot run part of a plan refuse (kUnsupported).
  [[nodiscard]] virtual Result<void> set_membership(const EngineMembership& membership) {
    (void)membership;
    return unsupported("the " + std::string(name()) + " executor does not run elastic refits");
  }
  // Has every execute() that follows call `gate` (nullptr: none; it must outlive those calls).
  // false: this executor takes no gate, and whoever does its work does it before execute().
  virtual bool set_send_gate(SendGate* gate) {
    (void)gate;
    return false;
  }

 protected:
  // allocate_host() once the size is checked.
  [[nodiscard]] virtual Result<std::unique_ptr<HostAllocation>> allocate(Bytes bytes) {
    return heap_allocation(bytes);
  }
};

}  // namespace refit
