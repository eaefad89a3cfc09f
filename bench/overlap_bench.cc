// Cost of the overlap algebra for layouts the size of real refits: a [256, 2048, 7168] stacked
// expert tensor moving from EP16 x PP-replicated training ranks to a 8 TP32 engines inference mesh.
#include <benchmark/benchmark.h>

#include "refit/core/overlap.h"

namespace {

refit::Layout layout(std::vector<std::int64_t> mesh, const char* placements, std::int32_t first) {
  std::vector<refit::Rank> ranks;
  std::int64_t n = 1;
  for (auto m : mesh) n *= m;
  for (std::int64_t i = 0; i < n; ++i) ranks.emplace_back(first + static_cast<std::int32_t>(i));
  return refit::Layout::make({256, 2048, 7168}, refit::Mesh::make(mesh, ranks).value(),
                             refit::parse_placements(placements).value())
      .value();
}

void BM_OverlapExpertsEp16ToTp32Dp8(benchmark::State& state) {
  const auto src = layout({16, 16}, "R,S0", 0);
  const auto dst = layout({8, 32}, "R,S1", 256);
  std::size_t pieces = 0;
  for (auto _ : state) {
    auto o = refit::overlaps(src, dst);
    pieces = 0;
    for (const auto& d : o->destinations) pieces += d.pieces.size();
    benchmark::DoNotOptimize(o);
  }
  state.counters["pieces"] = static_cast<double>(pieces);
}
BENCHMARK(BM_OverlapExpertsEp16ToTp32Dp8)->Unit(benchmark::kMicrosecond);

}  // namespace
