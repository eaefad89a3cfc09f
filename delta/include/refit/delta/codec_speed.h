#pragma once
// What the CPU codec costs, for predictions of a delta refit: the speeds bench/delta_bench measured
// on one core (bench/RESULTS.md, section "Delta codec", 2026-12-04, the 2-core VM, an 8 MiB
// bf16 chunk after one synthetic step, the codec's own choice of format), in GB/s of chunk (its
// dense bytes), and what the receiver's audit costs (checksum_of, a full pass). Between measured
// change fractions the speed is interpolated linearly in log(fraction) and log(speed); outside
// them it is the nearest measured one. No GPU has measured the GPU codec, so nothing here is a GPU figure.
#include "refit/core/units.h"

namespace refit {

struct DeltaCodecSpeed {
  BytesPerSecond encode;  // the sender: scan, choose, write (and zstd) a chunk
  BytesPerSecond decode;  // the receiver: check, then apply a payload
  BytesPerSecond audit;   // the receiver: checksum_of its bytes before a step
  // FP8 in flight: the sender (or a landing rank) quantizing a bf16 box before it encodes the fp8,
  // in GB/s of bf16 (bench/quantize_bench, the CPU quantizer the delta executor runs).
  BytesPerSecond quantize;
};

// One core's speed at `change_fraction` (clamped to [0.001, 1], the measured range).
DeltaCodecSpeed delta_cpu_codec_speed(double change_fraction);

}  // namespace refit
