#include "program_bounds.h"

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/quantize/quantize.h"

namespace refit::nccl_detail {
namespace {

[[nodiscard]] Result<void> inside(const Program& p, std::span<const std::int64_t> shards, const Address& a,
                                  std::int64_t begin, std::int64_t end) {
  std::int64_t size = 0;
  switch (a.kind) {
    case BufferKind::kStaging:
      if (a.index < 0 || static_cast<std::size_t>(a.index) >= p.staging_regions.size())
        return fail(ErrorCode::kInternal, fmt::format("staging region {} does not exist", a.index));
      size = p.staging_regions[static_cast<std::size_t>(a.index)];
      break;
    case BufferKind::kScratch:
      size = p.scratch_bytes;
      break;
    case BufferKind::kShard:
      if (a.index < 0 || static_cast<std::size_t>(a.index) >= shards.size())
        return fail(ErrorCode::kInternal, fmt::format("shard buffer {} does not exist", a.index));
      size = shards[static_cast<std::size_t>(a.index)];
      break;
  }
  if (a.offset + begin < 0 || a.offset + end > size)
    return fail(ErrorCode::kInternal, fmt::format("bytes [{}, {}) of a buffer of {} bytes", a.offset + begin,
                                                  a.offset + end, size));
  return {};
}

// The part's bf16 elements, its values and its scales.
[[nodiscard]] Result<void> check_quantize(const Program& p, std::span<const std::int64_t> shards,
                                          const Quantize& q) {
  std::int64_t last = 0;  // element offset of the part's last element
  for (std::size_t d = 0; d < q.shape.size(); ++d)
    if (q.shape[d] > 0) last += (q.shape[d] - 1) * q.strides[d];
  REFIT_TRY(inside(p, shards, q.source, 0, (last + 1) * 2));
  REFIT_TRY(inside(p, shards, q.values, 0, element_count(q.shape)));
  return inside(p, shards, q.scales, 0, scale_buffer_bytes(q.scheme, q.shape));
}

[[nodiscard]] Result<void> check_op(const Program& p, std::span<const std::int64_t> shards, const Op& op) {
  if (const auto* x = std::get_if<P2p>(&op)) return inside(p, shards, x->at, 0, x->bytes);
  if (const auto* q = std::get_if<Quantize>(&op)) return check_quantize(p, shards, *q);
  if (const auto* b = std::get_if<CopyBatch>(&op))
    for (const auto& c : b->copies) {
      const auto reach = copy_reach(c.geometry);
      REFIT_TRY(inside(p, shards, c.src, reach.src_begin, reach.src_end));
      REFIT_TRY(inside(p, shards, c.dst, reach.dst_begin, reach.dst_end));
    }
  return {};
}

}  // namespace

Result<void> check_bounds(const Program& program, std::span<const std::int64_t> shard_bytes) {
  for (std::size_t i = 0; i < program.ops.size(); ++i)
    REFIT_TRY_IN(check_op(program, shard_bytes, program.ops[i]), fmt::format("nccl program op {}", i));
  return {};
}

}  // namespace refit::nccl_detail
