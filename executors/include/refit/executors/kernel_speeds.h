#pragma once
// refit's GPU kernels timed on one of this machine's GPUs, as tests/gpu/run.sh times them: the
// box copy packing a TP8 column shard of a bf16 matrix (what pack and unpack move), and the FP8
// quantize kernels over a bf16 matrix, each at sizes several times an L2 cache, so that memory is
// timed and not the cache; and the NCCL executor's own costs per operation and per step, every
// plan rank on the one GPU (a GPU alone has no link to another to time). A cluster discovered on
// this machine takes them for its GPUs instead of figures scaled from another GPU
// (refit/facade/cluster_source.h, `--measure`).
#include <string>

#include "refit/core/units.h"
#include "refit/topology/cluster.h"

namespace refit {

struct KernelTiming {
  Bytes copy_bytes{Bytes{256} * (1 << 20)};      // bytes the copy moves (its matrix is 8 times as large)
  Bytes quantize_bytes{Bytes{512} * (1 << 20)};  // bf16 bytes each quantize reads
  Bytes nccl_bytes{Bytes{64} * (1 << 20)};       // bytes each run of the NCCL executor moves
  int repetitions = 5;                           // timed runs, after one untimed; the median is taken
};

struct KernelSpeeds {
  std::string gpu;         // the device's name, as CUDA gives it
  BytesPerSecond copy;     // bytes copied per second
  QuantizeRates quantize;  // bf16 bytes read per second, per FP8 format
  NcclCosts nccl;          // the NCCL executor's time per send or receive and per step
};

}  // namespace refit
