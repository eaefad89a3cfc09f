#include "quantize_tasks.h"

#include <iterator>

namespace refit::sim {
namespace {

std::size_t at(std::int32_t i) { return static_cast<std::size_t>(i); }

}  // namespace

QuantizeTasks::QuantizeTasks(const Plan& plan, QuantizeWork work, const Routes& routes, TaskSink& sink)
    : plan_(plan), work_(std::move(work)), routes_(routes), sink_(sink) {}

TaskId QuantizeTasks::add_task(Rank rank, Seconds time, std::vector<TaskId> deps) {
  auto& label = sink_.label();
  label.clear();
  fmt::format_to(std::back_inserter(label), "quantise on rank {}", rank.value);
  auto& spec = sink_.spec();
  spec.resources.clear();
  spec.deps = std::move(deps);
  spec.track = routes_.gpu_track(rank);
  spec.stream = -1;
  return sink_.add_call_task(std::string_view(label.data(), label.size()), Bytes{0}, time,
                             TaskKind::kQuantize);
}

void QuantizeTasks::add_senders() {
  sender_tasks_.assign(at(plan_.world_size()), {});
  for (std::int32_t r = 0; r < plan_.world_size(); ++r) {
    auto& tasks = sender_tasks_[at(r)];
    for (const Bytes b : work_.sender_boxes[at(r)]) {
      std::vector<TaskId> deps;
      if (!tasks.empty()) deps.push_back(tasks.back());
      tasks.push_back(add_task(Rank{r}, quantize_time(b, routes_.gpu(Rank{r})), std::move(deps)));
    }
  }
}

std::optional<TaskId> QuantizeTasks::through(Rank sender, std::int32_t boxes) const {
  if (boxes == 0) return std::nullopt;
  return sender_tasks_[at(sender.value)][at(boxes - 1)];
}

std::optional<TaskId> QuantizeTasks::before(const Transfer& t, std::int64_t chunk) const {
  return through(t.sender, work_.sender_order.needs(t.id, chunk));
}

TaskId QuantizeTasks::add_step(const Transfer& t, std::vector<TaskId> deps) {
  Bytes source{0};
  for (const auto& s : t.segments)
    if (const auto& q = plan_.tensors[s.tensor].quantization; !q->is_scales())
      source += Bytes{s.box.volume() * dtype_size(q->from)};
  const TaskId task = add_task(t.receiver, quantize_time(source, routes_.gpu(t.receiver)), std::move(deps));
  sink_.assign_last(t.id);
  return task;
}

void QuantizeTasks::add_receivers(std::span<const std::int32_t> order, std::span<const TaskId> ends) {
  std::vector<std::vector<TaskId>> landed(at(plan_.world_size()));
  for (const std::int32_t t : order)
    if (work_.before_receiver[at(t)])
      landed[at(plan_.transfers[at(t)].receiver.value)].push_back(ends[at(t)]);
  for (std::int32_t r = 0; r < plan_.world_size(); ++r)
    if (const Bytes b = work_.receiver_bytes[at(r)]; b.value > 0)
      add_task(Rank{r}, quantize_time(b, routes_.gpu(Rank{r})), std::move(landed[at(r)]));
}

}  // namespace refit::sim
