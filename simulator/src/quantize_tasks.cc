#include "quantize_tasks.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "refit/core/index.h"
#include "refit/core/quantization.h"

namespace refit::sim {
QuantizeTasks::QuantizeTasks(const Plan& plan, QuantizeWork work, const Routes& routes, TaskSink& sink,
                             const ExecutionModel& execution)
    : plan_(plan),
      work_(std::move(work)),
      routes_(routes),
      sink_(sink),
      sender_tasks_(at(plan.world_size())),
      takes_turns_(at(plan.world_size()), false),
      puts_since_box_(at(plan.world_size())) {
  // A step-paced model quantizes at the start of each step, beside its sends (step_tasks.h).
  if (!execution.quantizes_on_sending_thread || execution.step_chunks > 0) return;
  for (const Transfer& t : plan.transfers)
    if (!work_.sender_boxes[at(t.sender.value)].empty() && routes.copied_by_sender(t))
      takes_turns_[at(t.sender.value)] = true;
}

// In scratch of its own: a sender that takes turns gets its tasks while a transfer fills the
// sink's.
TaskId QuantizeTasks::add_task(Rank rank, Seconds time, std::vector<TaskId> deps, std::int32_t stream) {
  label_.clear();
  fmt::format_to(std::back_inserter(label_), "quantize on rank {}", rank.value);
  spec_.latency = time;
  spec_.deps = std::move(deps);
  spec_.track = routes_.gpu_track(rank);
  spec_.category = static_cast<std::uint32_t>(TaskKind::kQuantize);
  spec_.label = std::string_view(label_.data(), label_.size());
  spec_.stream = stream;
  return sink_.add_call_task(spec_);
}

Seconds QuantizeTasks::time_of(const BytesPerScheme& source, Rank rank) const {
  Seconds time{0};
  for (const QuantScheme s : all_quant_schemes())
    time += quantize_time(of_scheme(source, s), s, routes_.gpu(rank));
  return time;
}

void QuantizeTasks::add_senders() {
  for (std::int32_t r = 0; r < plan_.world_size(); ++r)
    if (!takes_turns_[at(r)]) add_boxes(Rank{r}, work_.sender_boxes[at(r)].size());
}

void QuantizeTasks::add_boxes(Rank sender, std::size_t boxes, std::int32_t stream) {
  auto& tasks = sender_tasks_[at(sender.value)];
  const auto& boxes_of = work_.sender_boxes[at(sender.value)];
  auto& puts = puts_since_box_[at(sender.value)];
  while (tasks.size() < boxes) {
    std::vector<TaskId> deps = std::exchange(puts, {});
    if (!tasks.empty()) deps.insert(deps.begin(), tasks.back());
    tasks.push_back(add_task(sender, quantize_time(boxes_of[tasks.size()], routes_.gpu(sender)),
                             std::move(deps), stream));
  }
}

// A stream's later put ends after its earlier ones, so one put per stream is kept.
void QuantizeTasks::put(const Transfer& t, TaskId piece) {
  if (!takes_turns_[at(t.sender.value)] || !routes_.copied_by_sender(t)) return;
  auto& puts = puts_since_box_[at(t.sender.value)];
  const std::int32_t stream = sink_.model().stream(piece);
  const auto same =
      std::ranges::find_if(puts, [&](TaskId p) { return stream >= 0 && sink_.model().stream(p) == stream; });
  if (same != puts.end())
    *same = piece;
  else
    puts.push_back(piece);
}

void QuantizeTasks::add_remaining_senders() {
  for (std::int32_t r = 0; r < plan_.world_size(); ++r)
    if (takes_turns_[at(r)]) add_boxes(Rank{r}, work_.sender_boxes[at(r)].size());
}

std::optional<TaskId> QuantizeTasks::through(Rank sender, std::int32_t boxes, std::int32_t stream) {
  if (boxes == 0) return std::nullopt;
  if (takes_turns_[at(sender.value)]) add_boxes(sender, static_cast<std::size_t>(boxes), stream);
  const TaskId box = sender_tasks_[at(sender.value)][at(boxes - 1)];
  if (stream >= 0 && sink_.model().stream(box) == stream) return std::nullopt;
  return box;
}

std::optional<TaskId> QuantizeTasks::before(const Transfer& t, std::int64_t chunk, std::int32_t stream) {
  return through(t.sender, work_.sender_order.needs(t.id, chunk), stream);
}

TaskId QuantizeTasks::add_step(const Transfer& t, std::vector<TaskId> deps) {
  BytesPerScheme source{};
  for (const auto& s : t.segments)
    if (const auto& q = plan_.tensors[s.tensor].quantization; !q->is_scales())
      of_scheme(source, q->scheme) += Bytes{s.box.volume() * dtype_size(q->from)};
  const TaskId task = add_task(t.receiver, time_of(source, t.receiver), std::move(deps));
  sink_.assign_last(t.id);
  return task;
}

void QuantizeTasks::add_receivers(std::span<const std::int32_t> order, std::span<const TaskId> ends) {
  std::vector<std::vector<TaskId>> landed(at(plan_.world_size()));
  for (const std::int32_t t : order)
    if (work_.before_receiver[at(t)])
      landed[at(plan_.transfers[at(t)].receiver.value)].push_back(ends[at(t)]);
  for (std::int32_t r = 0; r < plan_.world_size(); ++r)
    if (const Seconds time = time_of(work_.receiver_bytes[at(r)], Rank{r}); time.value > 0)
      add_task(Rank{r}, time, std::move(landed[at(r)]));
}

}  // namespace refit::sim
