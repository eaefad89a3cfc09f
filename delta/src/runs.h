#pragma once
// Grouping the changed elements into the runs of the runs encoding (refit/delta/run_positions.h
// has their positions' bytes). A lone change, the common case of an RL step, costs one byte when
// its gap is under 64.
#include <cstdint>
#include <utility>

#include "refit/delta/run_positions.h"

namespace refit::delta {

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
