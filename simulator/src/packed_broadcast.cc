#include "packed_broadcast.h"

#include "quantize_work.h"

#include <algorithm>

#include <fmt/format.h>

#include "refit/core/index.h"
#include "refit/core/quantization.h"

namespace refit::sim {
namespace {

// A buffer's export calls on one ring, summed: the export is a serial chain on every rank, so
// the order of its calls inside a buffer does not change its length, and summing keeps a
// DeepSeek-V3 refit at thousands of calls instead of 10^5.
struct ExportRun {
  CollectiveKind kind = CollectiveKind::kBroadcast;
  std::vector<Rank> ring;
  Bytes bytes;
  std::int64_t calls = 0;
};

struct Buffer {
  std::vector<ExportRun> runs;  // the export of the tasks whose first tensor lands in it
  Bytes gathered;               // rank 0's concatenations of gathered shards (torch.cat)
  Bytes bytes;                  // packed
  std::int64_t hf_tensors = 0;
  Bytes unpacked;  // what the busiest inference rank copies into its parameters
  // What every inference rank casts to fp8 before loading (FP8 at the receivers): each weight
  // whole, since the cast comes before vLLM's weight loaders narrow it to the rank's shard; per
  // FP8 format.
  BytesPerScheme cast{};
};

void add_run(Buffer& b, CollectiveKind kind, const std::vector<Rank>& ring, Bytes bytes) {
  const auto run =
      std::ranges::find_if(b.runs, [&](const ExportRun& r) { return r.kind == kind && r.ring == ring; });
  if (run == b.runs.end()) {
    b.runs.push_back(ExportRun{.kind = kind, .ring = ring, .bytes = bytes, .calls = 1});
    return;
  }
  run->bytes += bytes;
  ++run->calls;
}

// Without a memory figure the cap stands in, and the schedule says so.
Bytes buffer_target(const DeployInputs& in, CallSchedule& schedule) {
  const Bytes memory = in.cluster.cluster().gpu(in.cluster.gpu_of(Rank{0})).memory;
  if (memory.value <= 0) {
    schedule.notes.push_back(fmt::format(
        "cluster '{}': the memory of training rank 0's GPU is unknown, so NeMo RL's refit buffers are taken "
        "at "
        "their cap of {} bytes (give the cluster's GPUs memory_gb for its rule: {} of the GPU's memory)",
        in.cluster.name(), in.constants.buffer_cap.value, in.constants.buffer_memory_fraction));
    return in.constants.buffer_cap;
  }
  const auto share = Bytes{static_cast<std::int64_t>(in.constants.buffer_memory_fraction * memory.value)};
  return std::min(share, in.constants.buffer_cap);
}

// The inference rank holding the most of `tensors`: every inference rank unpacks at once on its
// own GPU, so the busiest one stands for all.
Rank busiest_receiver(const ReshardProblem& problem, std::span<const std::int32_t> tensors) {
  Rank busiest{problem.source_ranks()};
  Bytes most{-1};
  for (std::int32_t r = problem.source_ranks(); r < problem.world_size(); ++r) {
    Bytes held{0};
    for (const std::int32_t t : tensors) held += held_bytes(problem, t, Rank{r});
    if (held > most) std::tie(busiest, most) = std::tuple{Rank{r}, held};
  }
  return busiest;
}

// Bridge's tasks dealt into buffers by the producer's rule: a buffer closes once it exceeds the
// target, so it overshoots by at most one tensor.
std::vector<Buffer> pack(const DeployInputs& in, const std::vector<ExportTask>& tasks, Bytes target,
                         Rank receiver) {
  std::vector<Buffer> buffers(1);
  for (const auto& task : tasks) {
    Buffer& first = buffers.back();
    if (!task.pipeline.empty()) add_run(first, CollectiveKind::kBroadcast, task.pipeline, task.local);
    for (const auto& step : task.gathers)
      add_run(first, CollectiveKind::kAllGather, step.ring, step.gathered);
    if (!task.gathers.empty()) first.gathered += task.full;
    const auto& tensor = in.problem.tensors()[at(task.tensor)].tensor;
    const double share = static_cast<double>(held_bytes(in.problem, task.tensor, receiver).value) /
                         static_cast<double>(std::max<std::int64_t>(1, tensor.bytes().value));
    const Bytes each{task.full.value / task.hf_tensors};
    const bool cast = quantized_on_loading(tensor);
    const Bytes shard{static_cast<std::int64_t>(share * static_cast<double>(each.value))};
    const Bytes loaded = cast ? cast_bytes(tensor, shard) : shard;
    for (std::int64_t i = 0; i < task.hf_tensors; ++i) {
      Buffer& b = buffers.back();
      b.bytes += each;
      b.unpacked += loaded;
      if (cast) of_scheme(b.cast, tensor.quantization->scheme) += each;
      ++b.hf_tensors;
      if (b.bytes > target) buffers.emplace_back();
    }
  }
  if (buffers.back().hf_tensors == 0 && buffers.back().runs.empty()) buffers.pop_back();
  return buffers;
}

// The busiest receiver's cast of a buffer, as a call's quantizations: one per FP8 format it has.
std::vector<RankCast> quantizes(Rank receiver, const BytesPerScheme& bytes) {
  std::vector<RankCast> out;
  for (const QuantScheme s : all_quant_schemes())
    if (const Bytes b = of_scheme(bytes, s); b.value > 0) out.push_back(RankCast{receiver, b, s});
  return out;
}

std::vector<Rank> all_ranks(const ReshardProblem& problem) {
  std::vector<Rank> ranks;
  for (std::int32_t r = 0; r < problem.world_size(); ++r) ranks.push_back(Rank{r});
  return ranks;
}

// The buffer's export calls, one per ring; returns their indices.
std::vector<std::int32_t> add_export(const DeployInputs& in, const Buffer& b, std::size_t k,
                                     std::vector<std::int32_t> after, std::int32_t queue, CallSchedule& s) {
  std::vector<std::int32_t> calls;
  for (const auto& run : b.runs) {
    Collective collective = ring_collective(run.kind, run.ring, run.bytes, in);
    collective.latency = collective.latency * static_cast<double>(run.calls);
    const bool last = &run == &b.runs.back();
    calls.push_back(add_call(
        s, Call{.label = fmt::format("export for buffer {}", k),
                .group = run.kind == CollectiveKind::kBroadcast ? "export pipeline broadcast"
                                                                : "export all-gather",
                .queue = queue,
                .after = std::exchange(after, {}),
                .launch = in.constants.launch * static_cast<double>(run.calls),
                .copies_after = last && b.gathered.value > 0 ? std::vector{RankCopy{Rank{0}, b.gathered}}
                                                             : std::vector<RankCopy>{},
                .collective = std::move(collective)}));
  }
  return calls;
}

}  // namespace

void add_packed_broadcast(const DeployInputs& in, const TrainingStages& stages,
                          std::span<const std::int32_t> tensors, const std::vector<std::int32_t>& after,
                          PackedBroadcastQueues queues, CallSchedule& schedule) {
  const Bytes target = buffer_target(in, schedule);
  const Rank receiver = busiest_receiver(in.problem, tensors);
  const auto buffers = pack(in, export_tasks(in.problem, stages, std::vector(tensors.begin(), tensors.end())),
                            target, receiver);
  const auto world = all_ranks(in.problem);
  const auto& k = in.constants;
  std::vector<std::int32_t> broadcasts, unpacks;
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    const Buffer& b = buffers[i];
    auto export_after = i == 0 ? after : std::vector<std::int32_t>{};
    if (i >= at(k.buffers)) export_after.push_back(broadcasts[i - at(k.buffers)]);
    auto broadcast_after = add_export(in, b, i, std::move(export_after), queues.exporting, schedule);
    if (i >= at(k.buffers)) broadcast_after.push_back(unpacks[i - at(k.buffers)]);
    if (i == 0) broadcast_after.insert(broadcast_after.end(), after.begin(), after.end());
    broadcasts.push_back(add_call(
        schedule, Call{.label = fmt::format("packed broadcast {}", i),
                       .group = "packed broadcast",
                       .queue = queues.broadcast,
                       .after = std::move(broadcast_after),
                       .launch = k.launch,
                       .finish = k.torch_op * static_cast<double>(b.hf_tensors * k.load_weights_ops),
                       .copies_before = {RankCopy{Rank{0}, b.bytes}},
                       .collective = ring_collective(CollectiveKind::kBroadcast, world, b.bytes, in)}));
    unpacks.push_back(add_call(schedule, Call{.label = fmt::format("load_weights {}", i),
                                              .group = "load_weights copies",
                                              .queue = queues.unpack,
                                              .after = {broadcasts.back()},
                                              .copies_after = {RankCopy{receiver, b.unpacked}},
                                              .quantizes = quantizes(receiver, b.cast)}));
  }
}

}  // namespace refit::sim
