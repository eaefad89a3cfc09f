// CPU quantize throughput (refit::quantize), in GB/s of bf16 input, on a DeepSeek-V3 expert
// down_proj-sized weight (7168 x 2048): contiguous, a column shard of a wider tensor (rows
// strided, each row contiguous) and a column-major view (the last dim strided, so rows are
// gathered first). bench/RESULTS.md keeps the figures.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "refit/quantize/quantize.h"

namespace {

constexpr std::int64_t kRows = 7168;
constexpr std::int64_t kCols = 2048;

enum class Layout { kContiguous, kRowStrided, kColumnMajor };

// Normal bf16 values (their bits), for a buffer twice the weight's size.
std::vector<std::uint16_t> random_bf16(std::size_t n) {
  std::mt19937_64 rng(1);
  std::normal_distribution<float> normal;
  std::vector<std::uint16_t> out(n);
  for (auto& v : out) {
    const float x = normal(rng);
    std::uint32_t bits;
    std::memcpy(&bits, &x, 4);
    v = static_cast<std::uint16_t>(bits >> 16);
  }
  return out;
}

void BM_Quantize(benchmark::State& state, refit::Scheme scheme, Layout layout) {
  static const std::vector<std::uint16_t> data = random_bf16(static_cast<std::size_t>(2 * kRows * kCols));
  refit::Bf16View view{data.data(), {kRows, kCols}, {kCols, 1}};
  if (layout == Layout::kRowStrided) view.strides = {2 * kCols, 1};
  if (layout == Layout::kColumnMajor) view.strides = {1, kRows};
  std::vector<std::uint8_t> values(static_cast<std::size_t>(kRows * kCols));
  std::vector<std::byte> scales(static_cast<std::size_t>(refit::scale_buffer_bytes(scheme, view.shape)));
  for (auto _ : state) {
    refit::quantize(scheme, view, values, scales);
    benchmark::DoNotOptimize(values.data());
    benchmark::ClobberMemory();
  }
  const double input_bytes = 2.0 * kRows * kCols;
  state.counters["GB/s"] = benchmark::Counter(input_bytes, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK_CAPTURE(BM_Quantize, block128_contiguous, refit::Scheme::kFp8Block128, Layout::kContiguous)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, block128_row_strided, refit::Scheme::kFp8Block128, Layout::kRowStrided)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, block128_column_major, refit::Scheme::kFp8Block128, Layout::kColumnMajor)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, mxfp8_contiguous, refit::Scheme::kMxfp8, Layout::kContiguous)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, mxfp8_row_strided, refit::Scheme::kMxfp8, Layout::kRowStrided)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Quantize, mxfp8_column_major, refit::Scheme::kMxfp8, Layout::kColumnMajor)
    ->Unit(benchmark::kMillisecond);

}  // namespace
