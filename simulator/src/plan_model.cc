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
// FP8 in flight (quantize_work.h): a sender that quantizes weights does so box by box, in the
// order its chunks first read them (step by step, or by when each starts in its pair's paced
// share), each chunk after the boxes it reads (a transfer is cut where it waits), and after the puts
// before that chunk where its executor's sending thread copies them itself; a receiver that quantizes
// what lands does so in a task after the last of those transfers. A step-paced execution model (refit-nccl)
// runs the transfers step by step instead, as the lowering's step schedule says (step_tasks.h): no streams or
// grants, each rank's steps in order. The jobs are one file each: routes.h (resources and what a transfer
// crosses), piece_cuts.h (cuts, streams, grants, relay anchors), transfer_tasks.h and step_tasks.h (transfers
// as tasks), call_tasks.h (calls), quantize_tasks.h (FP8); this file puts them together.
#include "plan_model.h"

#include "call_check.h"
#include "call_tasks.h"
#include "piece_cuts.h"
#include "quantize_tasks.h"
#include "routes.h"
#include "step_tasks.h"
#include "task_sink.h"
#include "transfer_tasks.h"

#include <algorithm>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "refit/core/index.h"
#include "refit/core/try.h"
#include "refit/lowering/sender_quantize_order.h"

namespace refit::sim {
namespace {

// What a plan model is built from besides the plan: the lowering's copy costs, the execution
// model and its step schedule, when it is paced by steps.
struct Lowered {
  const lowering::LoweredPlan& plan;
  const ExecutionModel& execution;
  std::vector<lowering::TransferCopyCost> costs;
  std::optional<lowering::StepSchedule> steps;
};

// Each pair stream's share of the links it crosses: its bytes in the plan where the pairs share
// links by their bytes (the calls say, or without calls the execution model), else 1 each.
std::vector<double> stream_weights(const Plan& plan, const PieceCuts& cuts, bool by_bytes) {
  std::vector<double> weights(at(cuts.streams()), by_bytes ? 0.0 : 1.0);
  if (!by_bytes) return weights;
  for (const Transfer& t : plan.transfers)
    if (const auto s = cuts.stream(t.id); s >= 0) weights[at(s)] += static_cast<double>(t.bytes.value);
  for (double& w : weights) w = std::max(w, 1.0);  // a pair of empty transfers still flows
  return weights;
}

// The model of `lowered`'s plan, every transfer of which `calls` moves (when given): the
// resources, the pieces' cuts and streams, then the tasks in issue order, one transfer at a time
// or step by step.
[[nodiscard]] Result<PlanModel> build(Lowered lowered, const PlacedCluster& cluster,
                                      const PlanModelOptions& options, std::span<const std::int32_t> call_of,
                                      QuantizeWork work) {
  const Plan& plan = lowered.plan.plan();
  TaskSink sink(call_of);
  const Routes routes(cluster, sink.model());
  const auto cuts = REFIT_TRY(PieceCuts::make(lowered.plan, options.calls, call_of, options.window));
  const bool by_bytes =
      options.calls ? options.calls->pairs_share_by_bytes : lowered.execution.pairs_share_by_bytes;
  for (const double weight : stream_weights(plan, cuts, by_bytes)) sink.model().add_stream(weight);
  sink.reserve(plan.transfers.size() * 3);
  QuantizeTasks quantize(plan, std::move(work), routes, sink, lowered.execution);
  quantize.add_senders();
  std::unique_ptr<TransferMover> transfers;
  if (lowered.steps)
    transfers = std::make_unique<StepTasks>(lowered.plan, std::move(*lowered.steps), std::move(lowered.costs),
                                            routes, quantize, sink);
  else
    transfers =
        std::make_unique<TransferTasks>(lowered.plan, std::move(lowered.costs), routes, cuts, quantize, sink);
  if (!options.calls) {
    transfers->add(cuts.order(), nullptr);
  } else {
    CallTasks calls(plan, *options.calls, cuts.order(), call_of, cluster, routes, *transfers, sink);
    for (std::size_t c = 0; c < options.calls->calls.size(); ++c) calls.add(static_cast<std::int32_t>(c));
  }
  quantize.add_remaining_senders();
  if (!options.calls || options.calls->quantize_landed)
    quantize.add_receivers(cuts.order(), transfers->ends());
  return std::move(sink).take();
}

// A step-paced execution model runs every rank's chunks step by step: no pair window or
// in-order pairs pace them, and relays forward chunk by chunk.
Result<void> check_steps(const ExecutionModel& execution, const PlanModelOptions& options) {
  if (execution.step_chunks == 0) return {};
  REFIT_TRY_IN(check_pair_window(execution, options.window), "window");
  if (options.calls && (options.calls->pairs_in_order || options.calls->store_and_forward))
    return unsupported(
        fmt::format("execution model '{}' runs its plan step by step, not as a deployment "
                    "whose pairs send in order or whose relays store and forward",
                    execution.name));
  return {};
}

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
  CalledPart out{.plan = plan.without_transfers(), .schedule = schedule, .original = {}};
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

// NVLink transfers only between GPUs that have NVLink: a GPU alone in its domain may have none
// (0 GB/s; Cluster::make refuses it in a shared one), and a plan made for another cluster could
// still cross NVLink to it.
Result<void> check_nvlink(const Plan& plan, const PlacedCluster& cluster) {
  for (const Transfer& t : plan.transfers) {
    if (t.link != LinkKind::kNvlink) continue;
    for (const Rank r : {t.sender, t.receiver})
      if (const auto g = cluster.gpu_of(r); cluster.cluster().gpu(g).nvlink_bandwidth.value <= 0)
        return invalid(
            fmt::format("transfer #{} crosses NVLink, but GPU {} (rank {}) has none (nvlink_gbps 0): the "
                        "plan was made for another cluster",
                        t.id, g.value, r.value));
  }
  return {};
}

// `lowered`'s plan is the one the calls move (`call_of`, empty without calls).
Result<PlanModel> build_called(const lowering::LoweredPlan& lowered, const ReshardProblem& problem,
                               const PlacedCluster& cluster, const ExecutionModel& execution,
                               const PlanModelOptions& options, std::vector<std::int32_t> call_of) {
  Lowered in{.plan = lowered,
             .execution = execution,
             .costs = REFIT_TRY(lowering::copy_costs(lowered, problem, execution.zero_copy)),
             .steps = std::nullopt};
  if (execution.step_chunks > 0)
    in.steps = REFIT_TRY(lowering::make_step_schedule(lowered, execution.step_chunks));
  // A sender quantizes in the order its executor sends: by step, or by its pairs' paced share.
  const auto start = in.steps ? lowering::scheduled_start(*in.steps) : lowering::paced_start(lowered.plan());
  auto work = quantize_work(lowered.plan(), problem,
                            lowering::sender_quantize_order(lowered.plan(), lowered.staging(), start));
  return build(std::move(in), cluster, options, call_of, std::move(work));
}

}  // namespace

Result<PlanModel> build_plan_model(const Plan& plan, const ReshardProblem& problem,
                                   const PlacedCluster& cluster, const ExecutionModel& execution,
                                   const PlanModelOptions& options) {
  if (options.window < 0)
    return out_of_range(fmt::format("window must be >= 0 chunks, got {}", options.window));
  REFIT_TRY(check_steps(execution, options));
  if (!options.calls) {
    // The lowering is the plan's one structural gate (LoweredPlan::make); the NVLink check
    // indexes the cluster by the plan's ranks, so it comes after it.
    const auto lowered = REFIT_TRY(lowering::LoweredPlan::make(plan, options.staging));
    REFIT_TRY(check_nvlink(plan, cluster));
    return build_called(lowered, problem, cluster, execution, options, {});
  }
  // The schedule's checks and the called part index the plan by its transfers' numbers.
  REFIT_TRY(validate_structure(plan));
  REFIT_TRY(check_nvlink(plan, cluster));
  auto call_of = REFIT_TRY(call_of_each_transfer(plan, *options.calls));
  if (std::ranges::none_of(call_of, [](std::int32_t c) { return c < 0; })) {
    const auto lowered = REFIT_TRY(lowering::LoweredPlan::make_validated(plan, options.staging));
    return build_called(lowered, problem, cluster, execution, options, std::move(call_of));
  }
  const CalledPart part = called_part(plan, *options.calls, call_of);
  PlanModelOptions part_options = options;
  part_options.calls = &part.schedule;
  auto part_call_of = REFIT_TRY(call_of_each_transfer(part.plan, part.schedule));
  // The part passes validate_structure because the plan did: the same tensors and ranks, its
  // transfers in plan order, and every `via` renumbered to an earlier called transfer (a relay's
  // upstream is called, which call_of_each_transfer checked). Checking it again would walk most
  // of the plan's segments a second time.
  const auto lowered = REFIT_TRY(lowering::LoweredPlan::make_validated(part.plan, options.staging));
  auto model =
      REFIT_TRY(build_called(lowered, problem, cluster, execution, part_options, std::move(part_call_of)));
  for (auto& t : model.transfer_of_task)
    if (t >= 0) t = part.original[at(t)];
  return model;
}

}  // namespace refit::sim
