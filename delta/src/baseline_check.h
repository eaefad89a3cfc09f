#pragma once
// require_same_baseline without the chunk's name, for callers that name the chunk themselves.
#include <optional>

#include "refit/core/error.h"
#include "refit/delta/checksum.h"

namespace refit::delta {

Result<void> same_baseline(std::optional<Checksum> sender, std::optional<Checksum> receiver);

}  // namespace refit::delta
