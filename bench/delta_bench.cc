// The delta codec (refit::delta) on one core: encode and decode speed, in GB/s of chunk (dense
// bytes per CPU second), and the payload's size as a fraction of the dense chunk, for every
// format and the codec's per-chunk choice, on an 8 MiB chunk (refit's default chunk) of bf16 and
// fp32 weights after one synthetic RL step (synthetic_update.h) that changes 0.1 % to 100 % of
// the elements; and the chunk checksum alone. bench/RESULTS.md ("Delta codec") keeps the figures.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "refit/delta/codec.h"
#include "refit/delta/synthetic_update.h"

namespace {

using Bytes = std::vector<std::byte>;

constexpr std::int64_t kChunkBytes = 8 << 20;
constexpr double kFractions[] = {0.001, 0.01, 0.03, 0.1, 0.3, 1.0};

// A chunk before and after one RL step changing `fraction` of its elements.
struct StepPair {
  Bytes before;
  Bytes after;
};

const StepPair& step_pair(refit::DType dtype, double fraction) {
  static std::map<std::pair<refit::DType, double>, StepPair> pairs;
  auto [it, added] = pairs.try_emplace({dtype, fraction});
  if (added) {
    it->second.before.resize(kChunkBytes);
    (void)refit::fill_synthetic_weights(it->second.before, dtype, 0, 1);
    it->second.after = it->second.before;
    (void)refit::apply_synthetic_step(it->second.after, dtype, 0, {.change_fraction = fraction, .seed = 2},
                                      1);
  }
  return it->second;
}

// The payload turning `from` into `to`.
Bytes payload_of(refit::DeltaCodec& codec, const Bytes& from, const Bytes& to, refit::DType dtype) {
  Bytes out(static_cast<std::size_t>(refit::delta_payload_capacity(kChunkBytes, refit::dtype_size(dtype))));
  const auto header =
      codec.encode({.baseline = from, .current = to, .dtype = dtype, .base = refit::checksum_of(from)}, out);
  out.resize(static_cast<std::size_t>(header->payload_bytes()));
  return out;
}

void set_counters(benchmark::State& state, std::int64_t chunks_per_iteration, std::int64_t payload_bytes,
                  refit::DeltaFormat format) {
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(chunks_per_iteration * kChunkBytes),
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["payload/dense"] = static_cast<double>(payload_bytes) / kChunkBytes;
  state.SetLabel(refit::delta_format_name(format));
}

void encode(benchmark::State& state, refit::DType dtype, double fraction, refit::DeltaEncodeOptions options) {
  const StepPair& pair = step_pair(dtype, fraction);
  refit::DeltaCodec codec(options);
  Bytes out(static_cast<std::size_t>(refit::delta_payload_capacity(kChunkBytes, refit::dtype_size(dtype))));
  const refit::DeltaSource source{.baseline = pair.before,
                                  .current = pair.after,
                                  .dtype = dtype,
                                  .base = refit::checksum_of(pair.before)};
  refit::DeltaHeader header;
  for (auto _ : state) {
    header = *codec.encode(source, out);
    benchmark::DoNotOptimize(out.data());
  }
  set_counters(state, 1, header.payload_bytes(), header.format);
}

// Each iteration applies the step and then the step back, so the receiver's bytes return to
// where they started: two chunks decoded.
void decode(benchmark::State& state, refit::DType dtype, double fraction, refit::DeltaEncodeOptions options) {
  const StepPair& pair = step_pair(dtype, fraction);
  refit::DeltaCodec codec(options);
  const Bytes forth = payload_of(codec, pair.before, pair.after, dtype);
  const Bytes back = payload_of(codec, pair.after, pair.before, dtype);
  const refit::Checksum before = refit::checksum_of(pair.before), after = refit::checksum_of(pair.after);
  Bytes receiver = pair.before;
  for (auto _ : state) {
    if (!codec.decode(forth, {.bytes = receiver, .dtype = dtype, .base = before}) ||
        !codec.decode(back, {.bytes = receiver, .dtype = dtype, .base = after}))
      state.SkipWithError("decode failed");
    benchmark::ClobberMemory();
  }
  set_counters(state, 2, static_cast<std::int64_t>(forth.size()), refit::read_delta_header(forth)->format);
}

void checksum(benchmark::State& state) {
  const StepPair& pair = step_pair(refit::DType::kBF16, 0.01);
  for (auto _ : state) benchmark::DoNotOptimize(refit::checksum_of(pair.before));
  state.counters["GB/s"] =
      benchmark::Counter(static_cast<double>(kChunkBytes), benchmark::Counter::kIsIterationInvariantRate);
}

// The codec's choice with and without the entropy stage, with zstd's level 1 (the default), -1
// (faster, larger) and 3 (slower, smaller), then every format forced.
std::vector<std::pair<std::string, refit::DeltaEncodeOptions>> option_sets() {
  std::vector<std::pair<std::string, refit::DeltaEncodeOptions>> out = {
      {"smallest", {}},
      {"smallest-raw", {.entropy = false}},
      {"smallest-zstd-1", {.zstd_level = -1}},
      {"smallest-zstd3", {.zstd_level = 3}}};
  for (const auto encoding : refit::all_delta_encodings())
    for (const auto entropy : refit::all_delta_entropies()) {
      if (encoding == refit::DeltaEncoding::kDense && entropy != refit::DeltaEntropy::kNone) continue;
      const refit::DeltaFormat format{encoding, entropy};
      out.emplace_back(refit::delta_format_name(format), refit::DeltaEncodeOptions{.format = format});
    }
  return out;
}

void register_all() {
  benchmark::RegisterBenchmark("checksum/8MiB", checksum)->Unit(benchmark::kMillisecond);
  for (const refit::DType dtype : {refit::DType::kBF16, refit::DType::kFP32})
    for (const double fraction : kFractions)
      for (const auto& [name, options] : option_sets())
        for (const auto& [verb, fn] : {std::pair{"encode", &encode}, std::pair{"decode", &decode}})
          benchmark::RegisterBenchmark(
              fmt::format("{}/{}/{}%/{}", verb, refit::dtype_name(dtype), fraction * 100, name).c_str(),
              [fn = fn, dtype, fraction, options = options](benchmark::State& s) {
                fn(s, dtype, fraction, options);
              })
              ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
