#pragma once
// How a deployed system cuts a refit into library calls, and what each call costs besides moving
// its bytes. A CallSchedule is plain data: a deployment (deployment.h) describes one, the plan
// simulation (plan_simulation.h) runs it. Each call:
//   - starts once the previous call of its queue and every call in `after` have ended, pays
//     `launch`, then lets each rank make its `copies_before` (pack, stack, concatenate) and send;
//   - moves its plan transfers (relayed as the plan says) or runs one NCCL ring collective;
//   - lets each rank, once all it receives has landed, make its `quantizes` (FP8 at the
//     receivers: the engine casts what it loads) and then its `copies_after` (unpack, copy into a
//     fused parameter);
//   - ends once every rank has made them and `finish` has been paid after the last of them: a
//     call waits for its slowest rank.
// So n calls of one queue, each of fixed cost o moving b bytes at bandwidth w, take n(o + b/w);
// calls of two queues overlap.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "refit/core/quant_scheme.h"
#include "refit/core/units.h"
#include "refit/planner/execution_model.h"

namespace refit {

enum class CollectiveKind : std::uint8_t { kBroadcast, kAllGather };

// An NCCL ring collective. The ring crosses NVLink inside a domain and NICs between domains;
// NCCL runs it on several channels, each leaving a domain through a different member's NIC, so
// a ring of k ranks per domain spreads over k NICs there.
struct Collective {
  CollectiveKind kind = CollectiveKind::kBroadcast;
  std::vector<Rank> ranks{};  // in ring order; a broadcast's root first
  Bytes bytes{};              // broadcast: the buffer; all-gather: the gathered total (nccl-tests' S)
  Seconds latency{};          // NCCL's per-call latency for this ring (nccl_cost_model.h)
  double efficiency = 1.0;    // fraction of the links' bandwidth the collective reaches, in (0, 1]
};

// Bytes a rank copies device to device on its GPU as part of a call.
struct RankCopy {
  Rank rank;
  Bytes bytes;
};

// A rank's quantization on its GPU as part of a call: `bytes` of the weights' source dtype into
// the FP8 format `scheme`.
struct RankCast {
  Rank rank;
  Bytes bytes;
  QuantScheme scheme = QuantScheme::kFp8Block128;
};

struct Call {
  std::string label{};                    // names the call in errors and traces
  std::string group{};                    // its kind, shared by many calls: --explain sums by it
  std::int32_t queue = 0;                 // calls of one queue (a communicator, a stream) run in order
  std::vector<std::int32_t> after{};      // earlier calls that must have ended before it starts
  Seconds launch{};                       // before any byte moves: host work, launches, opening barrier
  Seconds finish{};                       // after the last copy: closing barrier, synchronisation
  std::vector<RankCopy> copies_before{};  // a rank sends once its copy is done
  std::vector<RankCopy> copies_after{};   // a rank copies once all it receives in the call has landed
  // A rank quantizes once all it receives in the call has landed, at its GPU's quantize rate for
  // each format, one cast after the other, and its copies after wait for them: NeMo RL's
  // fp8.load_weights casts each weight, then loads it.
  std::vector<RankCast> quantizes{};
  std::vector<std::int32_t> transfers{};  // indices into Plan::transfers, each in at most one call
  std::optional<Collective> collective{};
};

struct CallSchedule {
  std::vector<Call> calls{};  // in issue order: `after` names earlier calls only
  // Relays forward a transfer once all of it has arrived, not chunk by chunk; with
  // `relay_slices` > 1, once each of that many equal slices of it has arrived (M2N forwards each
  // CTA's slice of a piece as it lands).
  bool store_and_forward = false;
  std::int32_t relay_slices = 0;
  // The transfers of one (sender, receiver) pair complete one after another in issue order, as
  // puts on one connection do (M2N's GIN puts), even where the pair window is 0: so a relay can
  // forward the first slices while later ones still arrive.
  bool pairs_in_order = false;
  // The pairs share a link they cross by their bytes, as refit's executors pace them when the
  // plan's execution model says so (ExecutionModel::pairs_share_by_bytes); the deployed systems'
  // NCCL connections share links equally.
  bool pairs_share_by_bytes = false;
  // How the deployment runs the plan (its pair window, zero-copy rule, pacing): refit's executors
  // run every plan as one of their own execution models; nullptr: as the plan's model says.
  const ExecutionModel* execution = nullptr;
  // Every receiver quantizes what lands for it once all of it has landed, as refit's executors
  // do with FP8 at the receivers; false where the calls say who quantizes (Call::quantizes) or
  // nobody does (a benchmark that only moves bytes). The two never cover the same weight.
  bool quantize_landed = true;
  // What the deployment had to assume for want of an input, for the user to read.
  std::vector<std::string> notes{};
  // By problem tensor, whether the deployment moves it; empty: it moves every tensor. A benchmark
  // that times a representative per layer pattern moves a part of the model, and its figure is the
  // time of that part.
  std::vector<bool> moved_tensors{};
};

}  // namespace refit
