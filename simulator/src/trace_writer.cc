#include "refit/simulator/trace_writer.h"
#include "refit/core/index.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace refit::sim {
namespace {

constexpr int kPid = 1;
constexpr std::size_t kFlushBytes = 1 << 20;

void append_json_string(fmt::memory_buffer& buf, std::string_view s) {
  buf.push_back('"');
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      buf.push_back('\\');
      buf.push_back(c);
    } else if (static_cast<unsigned char>(c) < 0x20) {
      fmt::format_to(std::back_inserter(buf), "\\u{:04x}", static_cast<unsigned>(c));
    } else {
      buf.push_back(c);
    }
  }
  buf.push_back('"');
}

// Lane of each task within its track: the lowest lane free when the task becomes ready.
// Returns per task its lane (-1 without a track) and per track its number of lanes.
std::pair<std::vector<std::int32_t>, std::vector<std::int32_t>> assign_lanes(
    const Model& model, const std::vector<TaskTiming>& timings) {
  std::vector<std::int32_t> order;
  for (std::int32_t t = 0; t < model.task_count(); ++t)
    if (model.track(TaskId{t}) >= 0) order.push_back(t);
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
    return timings[at(a)].ready < timings[at(b)].ready;
  });
  using Busy = std::pair<double, std::int32_t>;  // (end, lane)
  struct TrackLanes {
    std::priority_queue<Busy, std::vector<Busy>, std::greater<>> busy;
    std::priority_queue<std::int32_t, std::vector<std::int32_t>, std::greater<>> free;
    std::int32_t count = 0;
  };
  std::vector<TrackLanes> tracks(at(model.track_count()));
  std::vector<std::int32_t> lane(at(model.task_count()), -1);
  for (const std::int32_t t : order) {
    auto& tr = tracks[at(model.track(TaskId{t}))];
    while (!tr.busy.empty() && tr.busy.top().first <= timings[at(t)].ready.value) {
      tr.free.push(tr.busy.top().second);
      tr.busy.pop();
    }
    if (tr.free.empty()) tr.free.push(tr.count++);
    lane[at(t)] = tr.free.top();
    tr.free.pop();
    tr.busy.push({timings[at(t)].end.value, lane[at(t)]});
  }
  std::vector<std::int32_t> lanes_per_track;
  for (const auto& tr : tracks) lanes_per_track.push_back(std::max(tr.count, 1));
  return {std::move(lane), std::move(lanes_per_track)};
}

void append_thread_metadata(fmt::memory_buffer& buf, std::int32_t tid, const std::string& name) {
  fmt::format_to(std::back_inserter(buf),
                 ",\n{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{"
                 "\"name\":",
                 kPid, tid);
  append_json_string(buf, name);
  fmt::format_to(std::back_inserter(buf),
                 "}}}},\n{{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{},\"tid\":{},"
                 "\"args\":{{\"sort_index\":{}}}}}",
                 kPid, tid, tid);
}

// The JSON string of each category's name, indexed by category.
std::vector<std::string> category_names(const Model& model) {
  std::uint32_t count = 0;
  for (std::int32_t t = 0; t < model.task_count(); ++t)
    count = std::max(count, model.category(TaskId{t}) + 1);
  std::vector<std::string> names;
  for (std::uint32_t c = 0; c < count; ++c) {
    fmt::memory_buffer quoted;
    append_json_string(quoted, model.category_name(c));
    names.emplace_back(quoted.data(), quoted.size());
  }
  return names;
}

void append_task(fmt::memory_buffer& buf, const Model& model, TaskId t, const TaskTiming& timing,
                 std::int32_t tid, const std::vector<std::string>& categories) {
  buf.append(std::string_view(",\n{\"ph\":\"X\",\"name\":"));
  if (const auto label = model.label(t); label.empty())
    fmt::format_to(std::back_inserter(buf), "\"task {}\"", t.value);
  else
    append_json_string(buf, label);
  buf.append(std::string_view(",\"cat\":"));
  buf.append(std::string_view(categories[model.category(t)]));
  constexpr double kMicro = 1e6;
  fmt::format_to(std::back_inserter(buf),
                 ",\"pid\":{},\"tid\":{},\"ts\":{:.3f},\"dur\":{:.3f},\"args\":{{\"task\":{},"
                 "\"bytes\":{},\"latency_us\":{:.3f},",
                 kPid, tid, timing.ready.value * kMicro, (timing.end - timing.ready).value * kMicro, t.value,
                 model.bytes(t).value, model.latency(t).value * kMicro);
  // Only where a cluster measured one: traces of the presets read as before.
  if (const Seconds overhead = model.overhead(t); overhead.value > 0)
    fmt::format_to(std::back_inserter(buf), "\"overhead_us\":{:.3f},", overhead.value * kMicro);
  fmt::format_to(std::back_inserter(buf), "\"flow_start_us\":{:.3f}}}}}", timing.start.value * kMicro);
}

void flush(fmt::memory_buffer& buf, std::ostream& out) {
  out.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  buf.clear();
}

}  // namespace

Result<void> write_chrome_trace(const Model& model, const SimulationResult& result, std::ostream& out) {
  if (result.tasks.size() != at(model.task_count()))
    return mismatch(fmt::format("the result has {} task timings but the model {} tasks", result.tasks.size(),
                                model.task_count()));
  const auto [lane, lanes_per_track] = assign_lanes(model, result.tasks);
  std::vector<std::int32_t> first_tid(lanes_per_track.size() + 1, 0);
  for (std::size_t k = 0; k < lanes_per_track.size(); ++k)
    first_tid[k + 1] = first_tid[k] + lanes_per_track[k];

  const auto categories = category_names(model);
  fmt::memory_buffer buf;
  fmt::format_to(std::back_inserter(buf),
                 "{{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n{{\"ph\":\"M\",\"name\":"
                 "\"process_name\",\"pid\":{},\"args\":{{\"name\":\"refit simulation\"}}}}",
                 kPid);
  for (std::int32_t k = 0; k < model.track_count(); ++k)
    for (std::int32_t l = 0; l < lanes_per_track[at(k)]; ++l)
      append_thread_metadata(
          buf, first_tid[at(k)] + l,
          l == 0 ? model.track_name(k) : fmt::format("{} #{}", model.track_name(k), l + 1));
  for (std::int32_t t = 0; t < model.task_count(); ++t) {
    if (lane[at(t)] < 0) continue;
    append_task(buf, model, TaskId{t}, result.tasks[at(t)],
                first_tid[at(model.track(TaskId{t}))] + lane[at(t)], categories);
    if (buf.size() > kFlushBytes) flush(buf, out);
  }
  buf.append(std::string_view("\n]}\n"));
  flush(buf, out);
  if (!out) return fail(ErrorCode::kRuntime, "could not write the trace to its stream");
  return {};
}

}  // namespace refit::sim
