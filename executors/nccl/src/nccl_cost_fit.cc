#include "nccl_cost_fit.h"

#include <vector>

#include "refit/core/least_squares.h"

namespace refit::nccl_detail {

std::optional<NcclFit> fit_nccl_runs(std::span<const NcclRun> runs) {
  std::vector<std::vector<double>> rows;
  std::vector<double> t;
  for (const auto& r : runs) {
    rows.push_back({1.0, static_cast<double>(r.chunks), static_cast<double>(r.steps)});
    t.push_back(r.time.value);
  }
  const auto p = least_squares(rows, t, std::vector<double>(t.size(), 1.0));
  if (!p) return std::nullopt;
  return NcclFit{.fixed = Seconds{(*p)[0]}, .per_chunk = Seconds{(*p)[1]}, .per_step = Seconds{(*p)[2]}};
}

}  // namespace refit::nccl_detail
