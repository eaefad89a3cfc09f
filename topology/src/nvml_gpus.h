#pragma once
// The GPUs of this machine as NVML reports them: PCI bus id, model, NVLinks and multi-node
// NVLink clique. NVML is loaded with dlopen from an injectable path.
#include <string>
#include <vector>

#include "found_machine.h"
#include "refit/core/error.h"

namespace refit::detail {

struct NvmlScan {
  std::vector<FoundGpu> gpus;      // PCIe locations are left to the caller (sysfs)
  std::vector<std::string> notes;  // plain statements for the user: what was not found, and why
};

// An NVML that cannot be loaded or started, or that lists no GPU, gives no GPU and a note; an
// NVML that fails midway gives an error (kRuntime).
[[nodiscard]] Result<NvmlScan> scan_nvml_gpus(const std::string& library);

}  // namespace refit::detail
