// The delta codec (refit::delta) on one core: encode and decode speed, in GB/s of chunk (dense
// bytes per CPU second), and the payload's size as a fraction of the dense chunk, for every
// format and the codec's per-chunk choice, on an 8 MiB chunk (refit's default chunk) of bf16 and
// fp32 weights after one synthetic RL step (synthetic_update.h) that changes 0.1 % to 100 % of
// the elements; and the chunk checksum alone. bench/RESULTS.md ("Delta codec") keeps the figures.
//
// fp8/...: deltas of FP8 in flight against deltas of bf16: a [2048, 2048] bf16 weight (8 MiB)
// after one step (changes of up to 2^-7 or 2^-3 of an element's value), sent as bf16 or quantized at the
// sender (fp8-block128, mxfp8: the CPU quantizer, as DeltaExecutor does) and delta-encoded against the
// previous step's bytes with the codec's own choice. Counters: "payload/bf16" the step's payload (values and
// scales) over the bf16 weight's bytes, "payload/dense" over what a dense refit of that form sends, "values
// changed" and "scales changed" the share of fp8 values and of scales whose bits changed; the time is the
// encoding of the step's payload (bench/RESULTS.md, "FP8 in flight with deltas").
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "refit/core/quant_scheme.h"
#include "refit/core/quantization.h"
#include "refit/delta/codec.h"
#include "refit/delta/synthetic_update.h"
#include "refit/quantize/quantize.h"

namespace {

using Bytes = std::vector<std::byte>;

constexpr std::int64_t kChunkBytes = 8 << 20;
constexpr double kFractions[] = {0.001, 0.01, 0.03, 0.1, 0.3, 1.0};

// A chunk before and after one RL step changing `fraction` of its elements.
struct StepPair {
  Bytes before;
  Bytes after;
};

// Each change moves the element by up to `relative_step` of its value.
const StepPair& step_pair(refit::DType dtype, double fraction,
                          double relative_step = refit::SyntheticUpdate{}.relative_step) {
  static std::map<std::tuple<refit::DType, double, double>, StepPair> pairs;
  auto [it, added] = pairs.try_emplace({dtype, fraction, relative_step});
  if (added) {
    it->second.before.resize(kChunkBytes);
    (void)refit::fill_synthetic_weights(it->second.before, dtype, 0, 1);
    it->second.after = it->second.before;
    (void)refit::apply_synthetic_step(
        it->second.after, dtype, 0, {.change_fraction = fraction, .relative_step = relative_step, .seed = 2},
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

// FP8 in flight: the [2048, 2048] bf16 weight of one chunk (8 MiB), sent as bf16 or as its fp8.
const refit::Shape kShape{2048, 2048};
constexpr std::int64_t kElements = kChunkBytes / 2;

// What one step sends of the weight in one form: the parts (bf16: the weight; fp8: its values
// and its scales), each before and after the step, with its element type.
struct Part {
  refit::DType dtype;
  Bytes before;
  Bytes after;
};

// `bf16` quantized: its fp8 values and its scales.
std::pair<Bytes, Bytes> quantized(refit::QuantScheme scheme, const Bytes& bf16) {
  Bytes values(static_cast<std::size_t>(kElements));
  Bytes scales(static_cast<std::size_t>(refit::scale_buffer_bytes(scheme, kShape)));
  refit::quantize(scheme,
                  refit::Bf16View{.data = reinterpret_cast<const std::uint16_t*>(bf16.data()),
                                  .shape = kShape,
                                  .strides = refit::row_major_strides(kShape)},
                  std::span(reinterpret_cast<std::uint8_t*>(values.data()), values.size()), scales);
  return {std::move(values), std::move(scales)};
}

// The parts of one step in one form (no scheme: bf16): the bf16 chunk of step_pair as the weight.
std::vector<Part> parts(std::optional<refit::QuantScheme> scheme, double fraction, double relative_step) {
  const auto& [before, after] = step_pair(refit::DType::kBF16, fraction, relative_step);
  if (!scheme) return {Part{refit::DType::kBF16, before, after}};
  auto [values_before, scales_before] = quantized(*scheme, before);
  auto [values_after, scales_after] = quantized(*scheme, after);
  return {Part{refit::quant_value_dtype(*scheme), std::move(values_before), std::move(values_after)},
          Part{refit::quant_scale_dtype(*scheme), std::move(scales_before), std::move(scales_after)}};
}

double changed_share(const Part& p) {
  const auto w = static_cast<std::size_t>(refit::dtype_size(p.dtype));
  std::int64_t changed = 0;
  for (std::size_t i = 0; i < p.before.size(); i += w)
    changed += std::equal(p.before.begin() + static_cast<std::ptrdiff_t>(i),
                          p.before.begin() + static_cast<std::ptrdiff_t>(i + w),
                          p.after.begin() + static_cast<std::ptrdiff_t>(i))
                   ? 0
                   : 1;
  return static_cast<double>(changed) / static_cast<double>(p.before.size() / w);
}

void fp8_step(benchmark::State& state, std::optional<refit::QuantScheme> scheme, double fraction,
              double relative_step) {
  const auto all = parts(scheme, fraction, relative_step);
  refit::DeltaCodec codec;
  std::vector<Bytes> out;
  std::vector<refit::Checksum> bases;
  for (const auto& p : all) {
    out.emplace_back(static_cast<std::size_t>(refit::kDeltaHeaderBytes) + p.before.size());
    bases.push_back(refit::checksum_of(p.before));
  }
  std::int64_t payload = 0, dense = 0;
  for (auto _ : state) {
    payload = dense = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      const auto header = codec.encode(
          {.baseline = all[i].before, .current = all[i].after, .dtype = all[i].dtype, .base = bases[i]},
          out[i]);
      if (!header) state.SkipWithError(header.error().message.c_str());
      payload += header->payload_bytes();
      dense += static_cast<std::int64_t>(all[i].before.size());
      benchmark::DoNotOptimize(out[i].data());
    }
  }
  state.counters["payload/bf16"] = static_cast<double>(payload) / static_cast<double>(kElements * 2);
  state.counters["payload/dense"] = static_cast<double>(payload) / static_cast<double>(dense);
  state.counters["values changed"] = changed_share(all.front());
  if (all.size() > 1) state.counters["scales changed"] = changed_share(all.back());
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
  // Steps of about one bf16 unit in the last place (the default), and of about one e4m3 unit.
  const std::optional<refit::QuantScheme> forms[] = {std::nullopt, refit::QuantScheme::kFp8Block128,
                                                     refit::QuantScheme::kMxfp8};
  for (const double relative_step : {0x1p-7, 0x1p-3})
    for (const auto& scheme : forms)
      for (const double fraction : kFractions)
        benchmark::RegisterBenchmark(
            fmt::format("fp8/encode/step2^{}/{}/{}%", std::ilogb(relative_step),
                        scheme ? refit::quant_scheme_name(*scheme) : "bf16", fraction * 100)
                .c_str(),
            [scheme, fraction, relative_step](benchmark::State& s) {
              fp8_step(s, scheme, fraction, relative_step);
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
