// The runs encoding: the positions of the changed elements as runs (runs.h), then their XOR values
// as byte planes (xor_planes.h). About a byte and a half of positions per lone change, so it wins
// while few elements change (docs/delta.md).
#include <fmt/format.h>

#include "change_visitors.h"
#include "element_types.h"
#include "position_coder.h"
#include "runs.h"
#include "varint.h"
#include "xor_planes.h"

namespace refit::delta {
namespace {

std::int64_t body_bytes(const ChangeStats& stats) {
  return stats.run_position_bytes + stats.changed * stats.element_bytes;
}

void write(std::span<const std::byte> baseline, std::span<const std::byte> current, const ChangeStats& stats,
           std::span<std::byte> out) {
  std::byte* positions = out.data();
  RunBuilder runs([&](const Run& run) { positions = put_run(positions, run); });
  with_element_type(stats.element_bytes, [&]<class T>(T) {
    PlaneWriter<T> planes(out.data() + stats.run_position_bytes, stats.changed);
    for_each_changed_element<T>(baseline, current, [&](std::int64_t i, T x) {
      runs.add(i);
      planes.put(x);
    });
  });
  runs.finish();
}

// The next run of `positions`, which must lie in [end, elements) and hold at most `left` elements.
Result<Run> take_run(std::span<const std::byte>& positions, std::int64_t end, std::int64_t elements,
                     std::int64_t left) {
  const auto head = take_varint(positions);
  if (!head) return parse_error("runs body: a run's position is cut short or overflows 64 bits");
  const std::uint64_t gap = *head >> 1;
  std::uint64_t length = 1;
  if ((*head & 1) != 0) {
    const auto more = take_varint(positions);
    if (!more || *more > static_cast<std::uint64_t>(left))
      return parse_error("runs body: a run's length is bad");
    length = *more + 2;
  }
  if (gap > static_cast<std::uint64_t>(elements - end) ||
      length > static_cast<std::uint64_t>(elements - end) - gap)
    return parse_error(fmt::format("runs body: a run past the chunk's {} elements", elements));
  if (length > static_cast<std::uint64_t>(left))
    return parse_error("runs body: the runs hold more elements than the header says changed");
  return Run{.gap = static_cast<std::int64_t>(gap), .length = static_cast<std::int64_t>(length)};
}

struct Changes {
  // Calls visit(element index, XOR value) for every element of every run, checking as it goes.
  template <class T, class Visit>
  static Result<void> list(std::span<const std::byte> body, const DeltaHeader& header, Visit& visit) {
    const std::int64_t elements = header.chunk_bytes / header.element_bytes;
    const std::int64_t changed = header.changed_elements;
    const std::int64_t values = changed * header.element_bytes;
    if (static_cast<std::int64_t>(body.size()) < values)
      return parse_error(fmt::format("runs body of {} bytes, shorter than its {} values of {} bytes",
                                     body.size(), changed, header.element_bytes));
    auto positions = body.first(body.size() - static_cast<std::size_t>(values));
    PlaneReader<T> planes(positions.data() + positions.size(), changed);
    std::int64_t end = 0;
    for (std::int64_t seen = 0; seen < changed;) {
      const auto run = take_run(positions, end, elements, changed - seen);
      if (!run) return std::unexpected(run.error());
      const std::int64_t start = end + run->gap;
      for (std::int64_t i = start; i < start + run->length; ++i) visit(i, planes.next());
      end = start + run->length;
      seen += run->length;
    }
    if (!positions.empty())
      return parse_error(
          fmt::format("runs body: {} bytes of positions after the last changed element", positions.size()));
    return {};
  }
};

}  // namespace

const PositionCoder& runs_coder() {
  static constexpr PositionCoder coder{.id = DeltaEncoding::kRuns,
                                       .body_bytes = body_bytes,
                                       .write = write,
                                       .check = check_changes<Changes>,
                                       .apply = apply_changes<Changes>};
  return coder;
}

}  // namespace refit::delta
