#include "timed_kernels.h"

#include <map>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {

Result<ClusterSpec> with_timed_kernels(ClusterSpec spec, const KernelTimer& timer,
                                       std::vector<std::string>& notes) {
  std::map<std::string, KernelSpeeds, std::less<>> timed;
  for (auto& g : spec.gpus) {
    if (g.pci_bus_id.empty())
      return invalid(fmt::format(
          "GPU {} has no PCI bus id: no NVIDIA GPU was found on this machine, so there is nothing to time",
          g.id.value));
    auto it = timed.find(g.pci_bus_id);
    if (it == timed.end()) {
      auto speeds = REFIT_TRY_IN(timer(g.pci_bus_id), fmt::format("GPU {} ({})", g.id.value, g.pci_bus_id));
      notes.push_back(fmt::format(
          "timed refit's kernels on GPU {} ({}, {}): copies {:.0f} GB/s, quantize {:.0f} GB/s of bf16 "
          "(fp8-block128) and {:.0f} (mxfp8); the NCCL executor {:.2f} us per send or receive and "
          "{:.2f} us per step",
          g.id.value, g.pci_bus_id, speeds.gpu, speeds.copy.gbps(),
          of_scheme(speeds.quantize, QuantScheme::kFp8Block128).gbps(),
          of_scheme(speeds.quantize, QuantScheme::kMxfp8).gbps(), speeds.nccl.per_op.value * 1e6,
          speeds.nccl.per_step.value * 1e6));
      it = timed.emplace(g.pci_bus_id, std::move(speeds)).first;
    }
    g.copy_bandwidth = it->second.copy;
    g.quantize_bandwidth = it->second.quantize;
    g.nccl_costs = it->second.nccl;
  }
  spec.assumptions.clear();
  return spec;
}

}  // namespace refit
