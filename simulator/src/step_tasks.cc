#include "step_tasks.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "refit/topology/measured_kernels.h"

namespace refit::sim {

bool nccl_costs_assumed(const PlacedCluster& cluster, std::int32_t ranks) {
  for (std::int32_t r = 0; r < ranks; ++r)
    if (!cluster.cluster().gpu(cluster.gpu_of(Rank{r})).nccl_costs) return true;
  return false;
}

std::string nccl_costs_assumption() {
  const MeasuredKernels& m = reference_kernels();
  return fmt::format(
      "refit's NCCL executor is charged {:.2f} us per send or receive and {:.2f} us per step on a GPU "
      "without measured costs (nccl_overhead_us), as it ran on the {} ({}, tests/gpu/run.sh); `refit topo "
      "--discover --measure` measures them on this machine's GPUs",
      m.nccl.per_op.value * 1e6, m.nccl.per_step.value * 1e6, m.gpu, m.date);
}

StepTasks::StepTasks(const lowering::LoweredPlan& lowered, lowering::StepSchedule schedule,
                     std::vector<lowering::TransferCopyCost> costs, const Routes& routes,
                     QuantizeTasks& quantize, TaskSink& sink)
    : lowered_(lowered),
      schedule_(std::move(schedule)),
      costs_(std::move(costs)),
      routes_(routes),
      quantize_(quantize),
      sink_(sink),
      ends_(lowered.plan().transfers.size()),
      rank_last_(at(lowered.plan().world_size())),
      rank_post_(at(lowered.plan().world_size())),
      rank_ops_(at(lowered.plan().world_size()), -1),
      rank_step_(at(lowered.plan().world_size())),
      rank_quantize_(at(lowered.plan().world_size())),
      rank_boxes_(at(lowered.plan().world_size()), 0) {}

// Runs of a transfer's chunks in one step, by step, then in issue order.
std::vector<StepTasks::StepPiece> StepTasks::pieces_of(std::span<const std::int32_t> transfers) const {
  std::vector<StepPiece> pieces;
  for (const std::int32_t t : transfers) {
    const auto& steps = schedule_.step[at(t)];
    const auto n = static_cast<std::int64_t>(steps.size());
    for (std::int64_t first = 0, last = 0; first < n; first = last + 1) {
      last = first;
      while (last + 1 < n &&
             steps[static_cast<std::size_t>(last + 1)] == steps[static_cast<std::size_t>(first)])
        ++last;
      pieces.push_back(
          {.step = steps[static_cast<std::size_t>(first)], .transfer = t, .first = first, .last = last});
    }
  }
  std::ranges::stable_sort(pieces, {}, &StepPiece::step);
  return pieces;
}

void StepTasks::add(std::span<const std::int32_t> transfers, const CallGate* gate) {
  const auto pieces = pieces_of(transfers);
  const auto& plan = lowered_.plan();
  for (std::size_t begin = 0; begin < pieces.size();) {
    std::size_t end = begin;
    while (end < pieces.size() && pieces[end].step == pieces[begin].step) ++end;
    // The quantize steps first: the rank's group of the step waits for them.
    for (std::size_t i = begin; i < end; ++i)
      if (const auto& t = plan.transfers[at(pieces[i].transfer)]; t.quantizes() && pieces[i].first == 0)
        add_quantize_step(t, gate);
    // The boxes each sender's chunks of the step read, quantized at the start of the step.
    for (std::size_t i = begin; i < end; ++i)
      if (const auto& t = plan.transfers[at(pieces[i].transfer)]; !t.quantizes()) {
        auto& boxes = rank_boxes_[at(t.sender.value)];
        boxes = std::max(boxes, quantize_.needs(t, pieces[i].last));
      }
    post_step(std::span(pieces).subspan(begin, end - begin), gate);
    for (std::size_t i = begin; i < end; ++i)
      if (!plan.transfers[at(pieces[i].transfer)].quantizes()) add_piece(pieces[i], gate);
    end_step(pieces[begin].step);
    begin = end;
  }
}

void StepTasks::add_quantize_step(const Transfer& t, const CallGate* gate) {
  std::vector<TaskId> deps;
  if (const auto last = rank_last_[at(t.receiver.value)]) deps.push_back(*last);
  for (const std::int32_t u : t.upstream()) deps.push_back(ends_[at(u)]);
  if (gate) deps.push_back(gate->start);
  const TaskId task = quantize_.add_step(t, std::move(deps));
  ends_[at(t.id)] = task;
  rank_quantize_[at(t.receiver.value)] = task;
  rank_does(t.receiver, task);
}

// Each rank's posting of the step: after its previous step (and its call's start), one NCCL group
// of a send or a receive per chunk. A rank whose step only quantizes posts its step too (the
// executor's block of the step, without operations); its step's end waits for that.
void StepTasks::post_step(std::span<const StepPiece> pieces, const CallGate* gate) {
  const auto& plan = lowered_.plan();
  posting_.clear();
  const auto posts = [&](Rank r, std::int64_t ops) {
    auto& mine = rank_ops_[at(r.value)];
    if (mine < 0) {
      mine = 0;
      posting_.push_back(r.value);
    }
    mine += ops;
  };
  for (const auto& p : pieces) {
    const Transfer& t = plan.transfers[at(p.transfer)];
    const std::int64_t chunks = t.quantizes() ? 0 : p.last - p.first + 1;
    posts(t.sender, chunks);
    posts(t.receiver, chunks);
  }
  for (const std::int32_t r : posting_) {
    const NcclCosts costs = routes_.nccl_costs(Rank{r});
    auto& label = sink_.label();
    label.clear();
    fmt::format_to(std::back_inserter(label), "post step {} on rank {}", pieces.front().step, r);
    auto& spec = sink_.spec();
    spec.resources.clear();
    spec.deps.clear();
    if (const auto last = rank_last_[at(r)]) spec.deps.push_back(*last);
    if (gate) spec.deps.push_back(gate->start);
    spec.track = routes_.gpu_track(Rank{r});
    const Seconds cost = costs.per_step + costs.per_op * static_cast<double>(rank_ops_[at(r)]);
    rank_post_[at(r)] =
        sink_.add_call_task(std::string_view(label.data(), label.size()), Bytes{0}, cost, TaskKind::kFixed);
    // A rank with operations ends its step with them, which wait for its post.
    if (rank_ops_[at(r)] == 0) rank_does(Rank{r}, rank_post_[at(r)]);
    rank_ops_[at(r)] = -1;
  }
}

// Both ranks' postings of this step and quantize steps of this one, and their quantization of the boxes
// their sends of this step read; for a transfer's first piece its call; for its last, the ends of the
// upstreams it forwards all of.
void StepTasks::piece_deps(const Transfer& t, const StepPiece& p, const CallGate* gate,
                           std::vector<TaskId>& deps) {
  deps.clear();
  for (const Rank r : {t.sender, t.receiver}) {
    deps.push_back(rank_post_[at(r.value)]);
    if (const auto q = rank_quantize_[at(r.value)]) deps.push_back(*q);
    if (const auto q = quantize_.through(r, rank_boxes_[at(r.value)])) deps.push_back(*q);
  }
  if (p.first == 0) {
    if (gate) {
      deps.push_back(gate->start);
      if (const auto copy = gate->copy_of_rank[at(t.sender.value)]; copy >= 0) deps.push_back(TaskId{copy});
    }
  }
  if (p.last + 1 < lowered_.layout(t.id).chunks()) return;
  // make_step_schedule asked for every chunk's waits, so they are there.
  const auto waits = lowered_.waits(t.id, p.last).value();
  for (const auto& w : waits)
    if (w.chunks == lowered_.layout(w.transfer).chunks()) deps.push_back(ends_[at(w.transfer)]);
}

void StepTasks::add_piece(const StepPiece& p, const CallGate* gate) {
  const Transfer& t = lowered_.plan().transfers[at(p.transfer)];
  const auto& cost = costs_[at(t.id)];
  const auto& layout = lowered_.layout(t.id);
  auto& label = sink_.label();
  label.clear();
  fmt::format_to(std::back_inserter(label), "#{} {}->{} step {}", t.id, t.sender.value, t.receiver.value,
                 p.step);
  auto& spec = sink_.spec();
  routes_.crossed(t, cost.packs, cost.unpacks, spec.resources);
  piece_deps(t, p, gate, spec.deps);
  const Seconds pack = p.first == 0 ? routes_.copy_time(cost.pack_first, t.sender) : Seconds{0};
  spec.bytes = Bytes{layout.chunk_end(p.last) - layout.chunk_begin(p.first)};
  spec.latency = routes_.latency(t) + pack;
  spec.track = routes_.track(t);
  spec.category = static_cast<std::uint32_t>(Routes::kind(t.link));
  spec.label = std::string_view(label.data(), label.size());
  spec.stream = -1;
  const TaskId task = sink_.add(t.id, pack);
  rank_does(t.sender, task);
  rank_does(t.receiver, task);
  if (p.last + 1 < layout.chunks()) return;
  ends_[at(t.id)] = task;
  if (!cost.unpacks) return;
  const Seconds unpack = routes_.copy_time(cost.unpack_last, t.receiver);
  spec.bytes = Bytes{0};
  spec.latency = unpack;
  spec.resources.clear();
  spec.deps.assign(1, task);
  ends_[at(t.id)] = sink_.add(t.id, unpack);
}

void StepTasks::rank_does(Rank r, TaskId task) {
  auto& tasks = rank_step_[at(r.value)];
  if (tasks.empty()) touched_.push_back(r.value);
  tasks.push_back(task);
}

// Each rank's step ends with its last task, or, where it has several, a task after all of them.
void StepTasks::end_step(std::int32_t step) {
  for (const std::int32_t r : touched_) {
    auto& tasks = rank_step_[at(r)];
    if (tasks.size() == 1) {
      rank_last_[at(r)] = tasks.front();
    } else {
      auto& label = sink_.label();
      label.clear();
      fmt::format_to(std::back_inserter(label), "step {} on rank {}", step, r);
      auto& spec = sink_.spec();
      spec.resources.clear();
      spec.deps = tasks;
      spec.track = routes_.gpu_track(Rank{r});
      rank_last_[at(r)] = sink_.add_call_task(std::string_view(label.data(), label.size()), Bytes{0},
                                              Seconds{0}, TaskKind::kFixed);
    }
    tasks.clear();
    rank_quantize_[at(r)].reset();
  }
  touched_.clear();
}

}  // namespace refit::sim
