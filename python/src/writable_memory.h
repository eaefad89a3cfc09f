#pragma once
// Whether host memory handed in as a destination may be written. DLPack carries no read-only
// flag: a torch tensor made from a read-only numpy memmap (torch.from_numpy only warns) exports
// as writable, and the executor's first write into it would kill the process. The process's own
// memory map (/proc/self/maps) says which pages are writable.
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"

namespace refit::python {

// Refuses, naming the buffer and rank, a (memory, name) whose bytes are not all in writable
// mappings of this process. Passes everything where the map cannot be read (not Linux).
[[nodiscard]] Result<void> check_writable(
    const std::vector<std::pair<std::span<std::byte>, std::string>>& buffers, Rank rank);

}  // namespace refit::python
