#pragma once
// Writes a simulation as Chrome trace event JSON (Perfetto's UI opens it, as does Chrome's trace
// viewer; docs/guide/architecture.md): {"traceEvents": [...]} with one complete event (ph "X",
// microseconds) per task that has a track, spanning from the moment it became ready to its end
// (args give the moment its data started to flow, its bytes, and its latency).
// Concurrent tasks of one track (flows sharing a NIC) would not nest, which trace viewers draw
// wrongly, so a track gets as many lanes as it has tasks overlapping in time; each lane is a tid
// named by thread_name metadata ("gpu 3", then "gpu 3 #2", ...), numbered in (track, lane) order.
#include <ostream>

#include "refit/core/error.h"
#include "refit/simulator/model.h"
#include "refit/simulator/simulate.h"

namespace refit::sim {

// Fails if `result` does not come from `model` (kMismatch), or if the stream fails (kRuntime).
[[nodiscard]] Result<void> write_chrome_trace(const Model& model, const SimulationResult& result,
                                              std::ostream& out);

}  // namespace refit::sim
