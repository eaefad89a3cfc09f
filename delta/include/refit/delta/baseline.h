#pragma once
// The baseline of a delta refit: per chunk, the bytes a receiver holds from the last refit, which
// its sender keeps too (or an equivalent it can compare with), and the checksum of those bytes that
// each side keeps (checksum.h). A delta applies only where the two checksums agree; anywhere else,
// and for a chunk whose last step failed or that a caller wants refreshed, the sender makes a full
// refit (DeltaSource::base = nullopt: a dense payload, which any receiver accepts).
//
// A step, per chunk:
//   sender:   header = codec.encode({baseline, current, dtype, base}, out); send out
//   receiver: base = codec.decode(payload, {bytes, dtype, base, name})   (all or nothing)
//   both, once every receiver of the chunk applied it: baseline = current, base = header.result
//   on any failure: base = nullopt on both sides for the chunks the step touched
// Either side may recompute its checksum from its bytes (checksum_of) to catch a writer outside
// refit; that costs a pass over the bytes, the kept checksum costs nothing.
#include <optional>
#include <string_view>

#include "refit/core/error.h"
#include "refit/delta/checksum.h"

namespace refit {

// Nothing when both sides hold a baseline with the same checksum; otherwise a kMismatch error
// naming `chunk` that says a full refit is needed.
[[nodiscard]] Result<void> require_same_baseline(std::optional<Checksum> sender,
                                                 std::optional<Checksum> receiver, std::string_view chunk);

namespace delta {
// require_same_baseline without the chunk's name, for callers that name the chunk themselves.
[[nodiscard]] Result<void> same_baseline(std::optional<Checksum> sender, std::optional<Checksum> receiver);
}  // namespace delta

}  // namespace refit
