#include <algorithm>
#include <cstring>

#include "delta_kernels.h"
#include "device_copy.h"

namespace refit::nccl_detail {

std::int64_t delta_workspace_words(const DeltaLanes& d) { return 3 * d.lanes + 3 * d.tiles + 3; }

void point_delta_workspace(DeltaLanes& d, std::uint64_t* workspace) {
  d.mask = workspace;
  d.lane_before = d.mask + d.lanes;
  d.lane_after = d.lane_before + d.lanes;
  d.tile_count = d.lane_after + d.lanes;
  d.tile_sum = d.tile_count + d.tiles;
  d.tile_positions = d.tile_sum + d.tiles;
  d.totals = d.tile_positions + d.tiles;
}

Result<void> HostDeltaKernels::prepare(DeltaLanes& d) {
  workspace_.assign(static_cast<std::size_t>(delta_workspace_words(d)), 0);
  point_delta_workspace(d, workspace_.data());
  return {};
}

Result<DeltaTotals> HostDeltaKernels::scan(const DeltaLanes& d) {
  with_delta_width(d.element_bytes, [&](auto w) {
    delta_reduce_tiles_on_host(d, [&](std::int64_t lane) {
      const DeltaLaneScan s = delta_scan_lane<decltype(w)::value>(d, lane);
      d.mask[lane] = s.mask;
      return DeltaTotals{delta_popcount(s.mask), s.sum};
    });
  });
  return delta_tile_prefix_on_host(d, d.tile_count, d.tile_sum);
}

Result<void> HostDeltaKernels::write(const DeltaLanes& d) {
  with_delta_width(d.element_bytes, [&](auto w) {
    delta_ranked_lanes_on_host(
        d, [&](std::int64_t lane) { return delta_popcount(d.mask[lane]); },
        [&](std::int64_t lane, std::uint64_t rank) {
          delta_write_lane<decltype(w)::value>(d, lane, rank);
          return std::uint64_t{0};
        });
  });
  return {};
}

Result<DeltaTotals> HostDeltaKernels::positions(const DeltaLanes& d) {
  delta_lane_carries_on_host(d);
  for (std::int64_t tile = 0; tile < d.tiles; ++tile) {
    std::int64_t first = 0, end = 0;
    delta_tile_lanes(d, tile, first, end);
    std::uint64_t bytes = 0;
    for (std::int64_t lane = first; lane < end; ++lane) bytes += delta_position_bytes_lane(d, lane);
    d.tile_positions[tile] = bytes;
  }
  return delta_tile_prefix_on_host(d, d.tile_positions, nullptr);
}

Result<void> HostDeltaKernels::write_runs(const DeltaLanes& d) {
  with_delta_width(d.element_bytes, [&](auto w) {
    for (std::int64_t tile = 0; tile < d.tiles; ++tile) {
      std::int64_t first = 0, end = 0;
      delta_tile_lanes(d, tile, first, end);
      std::uint64_t at = d.tile_positions[tile];
      std::uint64_t rank = d.tile_count[tile];
      for (std::int64_t lane = first; lane < end; ++lane) {
        delta_write_runs_lane<decltype(w)::value>(d, lane, at, rank);
        at += delta_position_bytes_lane(d, lane);
        rank += delta_popcount(d.mask[lane]);
      }
    }
  });
  return {};
}

Result<DeltaTotals> HostDeltaKernels::runs_to_mask(const DeltaLanes& d) {
  std::fill_n(d.mask, d.lanes, std::uint64_t{0});
  return delta_runs_to_mask_on_host(d);
}

Result<DeltaTotals> HostDeltaKernels::checksum(const DeltaLanes& d) {
  with_delta_width(d.element_bytes, [&](auto w) {
    delta_reduce_tiles_on_host(d, [&](std::int64_t lane) {
      return DeltaTotals{0, delta_checksum_lane<decltype(w)::value>(d, lane)};
    });
  });
  return delta_tile_prefix_on_host(d, d.tile_count, d.tile_sum);
}

Result<DeltaTotals> HostDeltaKernels::count(const DeltaLanes& d) {
  delta_reduce_tiles_on_host(d, [&](std::int64_t lane) {
    const DeltaLaneCount c = delta_count_lane(d, lane);
    return DeltaTotals{c.bits, c.past_end};
  });
  return delta_tile_prefix_on_host(d, d.tile_count, d.tile_sum);
}

Result<DeltaTotals> HostDeltaKernels::check(const DeltaLanes& d) {
  const auto bits = [&](std::int64_t lane) { return delta_count_lane(d, lane).bits; };
  with_delta_width(d.element_bytes, [&](auto w) {
    delta_ranked_lanes_on_host(d, bits, [&](std::int64_t lane, std::uint64_t rank) {
      return delta_check_lane<decltype(w)::value>(d, lane, rank);
    });
  });
  DeltaTotals t;
  for (std::int64_t tile = 0; tile < d.tiles; ++tile) t.sum += d.tile_sum[tile];
  return t;
}

Result<void> HostDeltaKernels::apply(const DeltaLanes& d) {
  const auto bits = [&](std::int64_t lane) { return delta_count_lane(d, lane).bits; };
  with_delta_width(d.element_bytes, [&](auto w) {
    delta_ranked_lanes_on_host(d, bits, [&](std::int64_t lane, std::uint64_t rank) {
      delta_apply_lane<decltype(w)::value>(d, lane, rank);
      return std::uint64_t{0};
    });
  });
  return {};
}

Result<void> HostDeltaKernels::copy(std::byte* to, const std::byte* from, std::int64_t bytes) {
  if (bytes > 0) std::memmove(to, from, static_cast<std::size_t>(bytes));
  return {};
}

Result<void> HostDeltaKernels::upload(std::byte* to, std::span<const std::byte> from) {
  return copy(to, from.data(), static_cast<std::int64_t>(from.size()));
}

Result<void> HostDeltaKernels::download(std::span<std::byte> to, const std::byte* from) {
  return copy(to.data(), from, static_cast<std::int64_t>(to.size()));
}

Result<void> HostDeltaKernels::copy_box(const DeviceCopy& box) {
  run_batch_on_host(std::span(&box, 1));
  return {};
}

Result<std::unique_ptr<DeltaBuffer>> HostDeltaKernels::allocate(std::int64_t bytes) {
  return host_delta_buffer(heap_allocation(Bytes{bytes}));
}

}  // namespace refit::nccl_detail
