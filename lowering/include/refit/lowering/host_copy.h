#pragma once
// A rank program's copies on host memory: packing a chunk into staging before it is sent, and
// putting a chunk where it belongs after it has landed. Executors of host memory (UCX) call these;
// the tests run whole plans through them.
#include <cstddef>
#include <cstdint>
#include <span>

#include "refit/core/error.h"
#include "refit/lowering/rank_program.h"

namespace refit::lowering {

// Where a rank's buffers start in this process: one pointer per buffer of each side (per shard,
// or per framework parameter when the shards have regions), and the scratch memory.
struct HostBuffers {
  std::span<std::byte* const> sources;
  std::span<std::byte* const> destinations;
  std::byte* scratch = nullptr;

  std::byte* base(BufferKind kind, std::int32_t index) const;
};

// Copies chunk k of `s` into `packed` (its bytes back to back, in message order).
[[nodiscard]] Result<void> pack_chunk(const RankProgram& program, const Send& s, std::int64_t k,
                                      const HostBuffers& buffers, std::byte* packed);

// Puts chunk k of `r` where it belongs once it has landed: from `packed` (a staged chunk) into
// each segment's place and the parts of the rank's own boxes; for a chunk that landed in place
// (`packed` null), only those parts, copied from where it landed.
void unpack_chunk(const RankProgram& program, const Receive& r, std::int64_t k, const HostBuffers& buffers,
                  const std::byte* packed);

}  // namespace refit::lowering
