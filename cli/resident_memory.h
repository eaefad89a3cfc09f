#pragma once
// This process's resident memory (VmRSS in /proc/self/status), which `refit run --iterations`
// reports after prepare, after warm-up and at the end, so a long run shows whether executing a
// prepared plan again and again holds on to memory.
#include <optional>

#include "refit/core/units.h"

namespace refit::cli {

// Bytes resident now; nullopt where /proc/self/status has no VmRSS (not Linux).
std::optional<Bytes> resident_bytes();

}  // namespace refit::cli
