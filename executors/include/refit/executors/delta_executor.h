#pragma once
// Delta refit (docs/delta.md), in front of another executor (the bytes where a DeltaMemory keeps
// them: host memory over UCX, the GPU over NCCL): every execute() is one
// step that moves, per piece (a segment of a transfer: one box of one tensor from one sender to
// one receiver), only what changed since the bytes the receiver holds, bit for bit.
//
// A step, on every rank of the plan together, round by round (delta_schedule.h: round 0 the
// transfers from source shards and the relays that forward whole boxes as they arrived, as the
// refit strategy's relays complete replicas over NVLink; round k + 1 the relays that forward, from
// their own destination shards, anything else they decoded in round k), each round:
//  1. each receiver packs its pieces from its destination shards and publishes their checksums
//     (checksum_of: an audit of the bytes it really holds, so a receiver whose bytes changed
//     outside refit is caught before anything is encoded against them);
//  2. each sender packs its pieces from its source shards and encodes each against the bytes it
//     last sent, where its checksum of those equals the receiver's, and densely where not (the
//     first step, after a failed step, after drift); a piece with no change sends nothing;
//  3. the ranks exchange the payloads' sizes and the executor behind moves the payloads as a plan
//     of its own (one byte tensor per transfer, prepared for this step), hop by hop: a relay copies
//     the payloads it forwards as they arrived, byte for byte, out of those it received in the hop
//     before (a sender encodes such a piece against its baseline only where every receiver down
//     the chain holds it: the payload must apply at each of them);
//  4. each receiver decodes each piece into its packed copy, all or nothing (the codec checks the
//     result's checksum before it writes), and only then unpacks it into its shard, once the
//     round's last hop has moved (a relay decodes its own copy beside its receivers). A step whose
//     transfers fail decodes nothing: no receiver is left with half a delta, and the senders forget
//     their baselines of the step's pieces, so the next step sends those densely.
// Re-balancing (DeltaRebalance, docs/delta.md): a plan balances its senders by the bytes it was
// told move (the dense bytes at first). After a step that succeeded, every rank knows every piece's
// payload size (step 3 agreed them), so every rank measures alike each tensor's payload and how far
// the payload's shares over the tensors drifted from the plan's; past the threshold every rank
// re-plans by those payloads and, where the new plan lightens the busiest sender enough,
// re-prepares. A box whose sender and round stay keeps its baseline (the audit still checks it
// against its receiver's bytes); the others go dense once.
// FP8 in flight (weights quantized at the senders): before round 0 each sender quantizes its bf16
// boxes as the dense refit does (sender_quantization.h) into memory of its own, and its pieces of
// the fp8 values and scales are encoded against the fp8 it last sent. The receivers' destination
// shards hold fp8 values and scales, as in a dense FP8 refit (what the engine loads), so the audit
// checks the very bytes the engine holds and every step leaves them equal, bit for bit, to what a
// dense FP8 refit of the same weights gives. A weight quantized at its landing ranks moves as its
// bf16 landing copy (deltas of bf16); each landing rank runs its quantize step at the start of the
// round after the copy's, and the fp8 it makes is forwarded in the rounds after, as relays do.
// Weights trained in fp8 need nothing of their own: the training ranks' fp8 values and scales are
// pieces of plain bytes, encoded against what was last sent.
// The sender keeps a packed copy of every box it sends (its baseline, one for all its receivers),
// so its memory grows by those bytes, twice while a step is in flight. Refused at prepare: pieces
// that land outside the receiver's destination shards (a relay's scratch, as gather-broadcast
// plans have), a quantize step of part of a box, framework parameters, shards the DeltaMemory
// cannot pack (device memory with host memory's), and FP8 in flight with shards in device memory
// (the quantizer runs on the host).
// Where the bytes lie and which codec runs is the DeltaMemory's (delta_memory.h): host memory and
// DeltaCodec in front of any executor of host memory, or device memory and the GPU codec in front
// of the NCCL executor (nccl/nccl_delta_executor.h); the steps above are the same for both.
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "refit/delta/codec.h"
#include "refit/executors/bootstrap.h"
#include "refit/executors/delta_memory.h"
#include "refit/executors/executor.h"

namespace refit {

struct DeltaRebalance {
  // The plan of the same problem, cluster and strategy with PlanOptions::moved_bytes = `moved` (by
  // tensor). Plans are deterministic, so every rank makes the same one.
  std::function<Result<Plan>(std::vector<Bytes> moved)> replan;
  // Every rank re-plans after a step whose share drift (DeltaStepReport::share_drift) exceeds this:
  // 0.1 re-plans once a tenth of the payload sits in tensors the plan weighed otherwise, far above
  // what the random changes of a uniform update drift by (docs/delta.md); 1 never re-plans.
  double max_drift = 0.1;
  // The new plan replaces the old only if its busiest sender, weighed by the step's payloads,
  // carries at least this share less than the old plan's: re-preparing sends every box whose
  // sender changed dense once, which a smaller gain does not repay soon. Either way the payloads
  // become what the drift is measured against.
  double min_gain = 0.05;
};

class DeltaExecutor final : public Executor {
 public:
  // `bootstrap` (the inner executor's) must outlive it. Without `rebalance` a prepared plan stays;
  // a plan re-balances as the executor did when it was prepared (rebalance_with). The bytes lie in
  // host memory and DeltaCodec(options) encodes them (host_delta_memory, its payloads from the
  // inner executor's allocate_host).
  DeltaExecutor(std::unique_ptr<Executor> inner, Bootstrap& bootstrap, DeltaEncodeOptions options = {},
                std::optional<DeltaRebalance> rebalance = std::nullopt);
  // The bytes lie where `memory` keeps them and its codec encodes them (delta_memory.h); the inner
  // executor moves payloads of memory's kind.
  DeltaExecutor(std::unique_ptr<Executor> inner, Bootstrap& bootstrap, std::unique_ptr<DeltaMemory> memory,
                std::optional<DeltaRebalance> rebalance = std::nullopt);

  std::string_view name() const override { return inner_->name(); }
  ExecutorCapabilities capabilities() const override;
  // How the plans prepared from now on re-balance (nullopt: never); those prepared before keep
  // theirs, since a re-plan must make plans of the problem they were prepared for.
  void rebalance_with(std::optional<DeltaRebalance> rebalance) { rebalance_ = std::move(rebalance); }
  // Besides the plan's own checks: host memory, contiguous shards, every transfer from its sender's
  // source shards into its receiver's destination box. A rank that refuses makes every rank
  // refuse; errors name the transfer or tensor.
  [[nodiscard]] Result<std::unique_ptr<PreparedPlan>> prepare(const Plan& plan, Rank rank,
                                                              const RankBuffers& buffers) override;
  // One step; the report's `delta` says what it moved and what it cost, and whether it re-planned
  // (then `prepared` holds the new plan).
  [[nodiscard]] Result<ExecutionReport> execute(PreparedPlan& prepared) override;
  // Each step agrees on checksums with every rank of the plan through the bootstrap, which a dead
  // rank would hold up: a delta refit is not elastic.
  [[nodiscard]] Result<void> set_membership(const EngineMembership&) override {
    return unsupported("delta refit agrees with every rank at each step, so it does not run elastic refits");
  }

 private:
  [[nodiscard]] Result<std::unique_ptr<HostAllocation>> allocate(Bytes bytes) override {
    return inner_->allocate_host(bytes);
  }

  std::unique_ptr<Executor> inner_;
  Bootstrap* bootstrap_;
  std::unique_ptr<DeltaMemory> memory_;
  std::optional<DeltaRebalance> rebalance_;
};

}  // namespace refit
