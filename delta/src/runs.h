#pragma once
// The runs encoding's positions: the changed elements grouped into runs of consecutive indices,
// each written as varint(gap * 2 + (length > 1)) and, for a run longer than one, varint(length - 2),
// where gap counts the unchanged elements since the previous run (since the chunk's start for the
// first). A lone change, the common case of an RL step, costs one byte when its gap is under 64.
#include <cstdint>
#include <utility>

#include "varint.h"

namespace refit::delta {

struct Run {
  std::int64_t gap = 0;
  std::int64_t length = 0;
};

inline std::uint64_t run_head(const Run& run) {
  return static_cast<std::uint64_t>(run.gap) * 2 + (run.length > 1 ? 1 : 0);
}

inline std::int64_t run_position_bytes(const Run& run) {
  return varint_bytes(run_head(run)) +
         (run.length > 1 ? varint_bytes(static_cast<std::uint64_t>(run.length - 2)) : 0);
}

inline std::byte* put_run(std::byte* out, const Run& run) {
  out = put_varint(out, run_head(run));
  return run.length > 1 ? put_varint(out, static_cast<std::uint64_t>(run.length - 2)) : out;
}

// Groups increasing element indices into runs, handing each finished run to `emit`.
template <class Emit>
class RunBuilder {
 public:
  explicit RunBuilder(Emit emit) : emit_(std::move(emit)) {}

  void add(std::int64_t index) {
    if (open_.length > 0 && index == start_ + open_.length) {
      ++open_.length;
      return;
    }
    finish();
    open_ = Run{.gap = index - end_, .length = 1};
    start_ = index;
  }

  // Emits the open run, if any.
  void finish() {
    if (open_.length == 0) return;
    emit_(open_);
    end_ = start_ + open_.length;
    open_ = Run{};
  }

 private:
  Emit emit_;
  Run open_;
  std::int64_t start_ = 0;
  std::int64_t end_ = 0;  // the index after the last emitted run
};

}  // namespace refit::delta
