#pragma once
// What the GPU benchmarks share: timing with CUDA events, cudaMemcpy device to device of the
// same traffic as the reference every figure is a ratio to (measured in the same run), and the
// rows they print, a markdown table that tests/gpu/run.sh gathers for bench/RESULTS.md
// (`--summary FILE` appends them there too). Sizes are several times the L2 (60 MB on an H200),
// so that HBM, not the cache, is measured.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace refit::gpu_bench {

// A benchmark program stops at the first CUDA failure, naming the call.
#define REFIT_BENCH_CUDA(call)                                                                   \
  do {                                                                                           \
    const cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

inline constexpr int kWarmup = 2;
inline constexpr int kRuns = 10;

// Mean milliseconds of `run` (which enqueues work on `stream`) over kRuns after kWarmup.
template <class F>
double mean_ms(cudaStream_t stream, F run) {
  for (int i = 0; i < kWarmup; ++i) run();
  cudaEvent_t start, stop;
  REFIT_BENCH_CUDA(cudaEventCreate(&start));
  REFIT_BENCH_CUDA(cudaEventCreate(&stop));
  REFIT_BENCH_CUDA(cudaEventRecord(start, stream));
  for (int i = 0; i < kRuns; ++i) run();
  REFIT_BENCH_CUDA(cudaEventRecord(stop, stream));
  REFIT_BENCH_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  REFIT_BENCH_CUDA(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms / kRuns;
}

// cudaMemcpyAsync device to device of `bytes` (reads and writes each once): the reference.
inline double memcpy_ms(void* to, const void* from, std::int64_t bytes, cudaStream_t stream) {
  return mean_ms(stream, [&] {
    REFIT_BENCH_CUDA(
        cudaMemcpyAsync(to, from, static_cast<std::size_t>(bytes), cudaMemcpyDeviceToDevice, stream));
  });
}

// One measured case: `traffic_bytes` of HBM reads plus writes, which cudaMemcpy of half as many
// bytes also moves; the ratio is memcpy's time over the case's.
struct Figure {
  std::string name;
  double traffic_bytes = 0;
  double ms = 0;
  double memcpy_ms = 0;
  std::optional<double> goal;  // the ratio aimed for, if any
  std::string note;            // e.g. the bound the access pattern allows
  double ratio() const { return memcpy_ms / ms; }
};

class Summary {
 public:
  // `--summary FILE`: rows are appended there too.
  Summary(int argc, char** argv, std::string_view title) {
    for (int i = 1; i + 1 < argc; ++i)
      if (std::string_view(argv[i]) == "--summary") file_ = std::fopen(argv[i + 1], "a");
    cudaDeviceProp prop{};
    REFIT_BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
    print("\n### %.*s on %s\n\n", static_cast<int>(title.size()), title.data(), prop.name);
  }
  Summary(const Summary&) = delete;
  Summary& operator=(const Summary&) = delete;
  ~Summary() {
    if (file_ != nullptr) std::fclose(file_);
  }

  // The header of row()'s table.
  void figures() {
    print("Each case the mean of %d runs after %d warm-ups; cudaMemcpy of the same traffic likewise.\n\n",
          kRuns, kWarmup);
    print("| case | traffic GB | ms | GB/s | cudaMemcpy ms | ratio | goal | |\n");
    print("|---|---:|---:|---:|---:|---:|---:|---|\n");
  }

  void row(const Figure& f) {
    const double ratio = f.ratio();
    const std::string goal = f.goal ? std::to_string(static_cast<int>(*f.goal * 100 + 0.5)) + " %" : "-";
    const char* verdict = !f.goal ? "" : ratio >= *f.goal ? "met" : "**below**";
    print("| %s | %.2f | %.3f | %.0f | %.3f | %.1f %% | %s | %s%s%s |\n", f.name.c_str(),
          f.traffic_bytes / 1e9, f.ms, f.traffic_bytes / f.ms / 1e6, f.memcpy_ms, 100 * ratio, goal.c_str(),
          verdict, f.note.empty() ? "" : " ", f.note.c_str());
  }

  template <class... A>
  void print(const char* format, A... args) {
    if constexpr (sizeof...(A) == 0) {
      std::fputs(format, stdout);
      if (file_ != nullptr) std::fputs(format, file_);
    } else {
      std::printf(format, args...);
      if (file_ != nullptr) std::fprintf(file_, format, args...);
    }
    std::fflush(stdout);
  }

 private:
  std::FILE* file_ = nullptr;
};

// Whether a GPU is there; prints why not (the benchmarks then exit 0, as in CI).
inline bool have_gpu(const char* program) {
  int count = 0;
  if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) return true;
  std::printf("%s: no CUDA device, nothing measured\n", program);
  return false;
}

}  // namespace refit::gpu_bench
