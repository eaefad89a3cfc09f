#pragma once
// The work of the GPU delta codec's kernels, written once for both compilers: nvcc runs it on the
// GPU and the CPU tests (tests/executors/nccl/delta_kernel_test.cc) run the very same functions
// lane by lane through run_*_on_host, comparing every payload with refit::DeltaCodec's bit for
// bit. The encodings are delta/'s (docs/delta.md): the bitmask (bit i of the mask set when
// element i changed, then the changed elements' XOR with the baseline as byte planes) and dense;
// the checksum is delta/'s checksum_term summed with wrapping adds, so that any order of the sum
// gives checksum_of's value. C++20 only (nvcc compiles it).
//
// A chunk is cut into lanes of 64 elements, one 64-bit word of the mask each, and lanes into
// tiles of kDeltaTileLanes (one thread block). A pass runs every lane independently; the tiles'
// results are reduced per tile (a block reduction on the GPU) into the workspace's tile arrays,
// and delta_tile_prefix turns the tiles' counts into exclusive offsets and the totals the host
// reads back. A changed element's place among the planes (its rank) is its tile's offset, its
// lane's offset in the tile (an exclusive scan of the lanes' counts) and its place in the lane.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "host_device.h"
#include "refit/delta/checksum.h"

namespace refit::nccl_detail {

inline constexpr int kDeltaLaneElements = 64;  // a mask word's bits
inline constexpr int kDeltaTileLanes = 256;    // threads of a block

// One chunk as the passes see it: the data, the workspace and the sizes. Pointers are device
// memory on the GPU, host memory in the CPU tests.
struct DeltaLanes {
  // Encoding: the sender's baseline and the bytes it sends; checksum pass: `current` is summed.
  const std::byte* baseline = nullptr;
  const std::byte* current = nullptr;
  // Decoding: the receiver's bytes, and the payload's mask and planes.
  std::byte* target = nullptr;
  const std::byte* mask_in = nullptr;
  const std::byte* planes_in = nullptr;
  // Encoding: the bitmask body (mask, then planes) written by delta_write_lane.
  std::byte* body = nullptr;
  // Workspace: a mask word per lane (encoding), a count and a sum per tile, three totals.
  std::uint64_t* mask = nullptr;
  std::uint64_t* tile_count = nullptr;
  std::uint64_t* tile_sum = nullptr;
  std::uint64_t* totals = nullptr;  // [count, sum, unused] once delta_tile_prefix has run
  std::int64_t bytes = 0;           // the chunk's
  std::int64_t elements = 0;
  std::int64_t lanes = 0;
  std::int64_t tiles = 0;
  std::int64_t changed = 0;  // the planes' count of values (writing and reading them)
  std::int32_t element_bytes = 1;
};

// The totals the host reads back after a pass and delta_tile_prefix.
struct DeltaTotals {
  std::uint64_t count = 0;  // changed elements, or set bits of a payload's mask
  std::uint64_t sum = 0;    // checksum terms' sum, or (counting a mask) lanes with bits past the end
};

REFIT_HOST_DEVICE std::int64_t delta_lanes_of(std::int64_t elements) {
  return (elements + kDeltaLaneElements - 1) / kDeltaLaneElements;
}
REFIT_HOST_DEVICE std::int64_t delta_tiles_of(std::int64_t lanes) {
  return (lanes + kDeltaTileLanes - 1) / kDeltaTileLanes;
}
REFIT_HOST_DEVICE std::int64_t delta_mask_bytes(std::int64_t elements) { return (elements + 7) / 8; }

// The set bits of `w`, and the index of its lowest set bit (w != 0): the GPU's instructions, the
// host's <bit> (which nvcc does not compile for the device).
REFIT_HOST_DEVICE std::uint64_t delta_popcount(std::uint64_t w) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__popcll(w));
#else
  return static_cast<std::uint64_t>(std::popcount(w));
#endif
}
REFIT_HOST_DEVICE int delta_lowest_bit(std::uint64_t w) {
#if defined(__CUDA_ARCH__)
  return __ffsll(static_cast<long long>(w)) - 1;
#else
  return std::countr_zero(w);
#endif
}

// `count` (<= 8) little-endian bytes at `p` as a word, zero above.
REFIT_HOST_DEVICE std::uint64_t delta_load_bytes(const std::byte* p, std::int64_t count) {
  std::uint64_t w = 0;
  for (std::int64_t i = 0; i < count; ++i) w |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return w;
}

// Word `index` of `bytes` bytes at `p`, the last one padded with zeros (the checksum's words).
REFIT_HOST_DEVICE std::uint64_t delta_load_word(const std::byte* p, std::int64_t bytes, std::int64_t index) {
  const std::int64_t first = index * 8;
  if (first + 8 <= bytes) {
#if defined(__CUDA_ARCH__)
    if (reinterpret_cast<std::uintptr_t>(p) % 8 == 0)
      return *reinterpret_cast<const std::uint64_t*>(p + first);
    return delta_load_bytes(p + first, 8);
#else
    std::uint64_t w;
    std::memcpy(&w, p + first, 8);
    return w;
#endif
  }
  return delta_load_bytes(p + first, bytes - first);
}

// The bits of an element of W bytes.
template <int W>
REFIT_HOST_DEVICE std::uint64_t delta_element_mask() {
  return W == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * W)) - 1;
}

// Lane `lane`'s words: the first, and how many (8 W for a whole lane, fewer for the last).
template <int W>
REFIT_HOST_DEVICE void delta_lane_words(const DeltaLanes& d, std::int64_t lane, std::int64_t& first,
                                        std::int64_t& count) {
  constexpr std::int64_t kWords = std::int64_t{kDeltaLaneElements} * W / 8;
  const std::int64_t words = (d.bytes + 7) / 8;
  first = lane * kWords;
  count = words - first < kWords ? words - first : kWords;
}

// Encoding, pass 1: the lane's mask word (bit e set when element 64 lane + e changed) and the
// change of the checksum, sum over its changed words of term(current) - term(baseline).
struct DeltaLaneScan {
  std::uint64_t mask = 0;
  std::uint64_t sum = 0;
};
template <int W>
REFIT_HOST_DEVICE DeltaLaneScan delta_scan_lane(const DeltaLanes& d, std::int64_t lane) {
  constexpr int kPerWord = 8 / W;
  std::int64_t first = 0, count = 0;
  delta_lane_words<W>(d, lane, first, count);
  DeltaLaneScan s;
  for (std::int64_t j = 0; j < count; ++j) {
    const std::uint64_t a = delta_load_word(d.baseline, d.bytes, first + j);
    const std::uint64_t b = delta_load_word(d.current, d.bytes, first + j);
    const std::uint64_t x = a ^ b;
    if (x == 0) continue;
    const auto index = static_cast<std::uint64_t>(first + j);
    s.sum += delta::checksum_term(b, index) - delta::checksum_term(a, index);
    REFIT_UNROLL
    for (int e = 0; e < kPerWord; ++e)
      if (((x >> (8 * W * e)) & delta_element_mask<W>()) != 0)
        s.mask |= std::uint64_t{1} << (j * kPerWord + e);
  }
  return s;
}

// The checksum pass: the sum of the lane's words' terms (of `current`); a full checksum_of.
template <int W>
REFIT_HOST_DEVICE std::uint64_t delta_checksum_lane(const DeltaLanes& d, std::int64_t lane) {
  std::int64_t first = 0, count = 0;
  delta_lane_words<W>(d, lane, first, count);
  std::uint64_t sum = 0;
  for (std::int64_t j = 0; j < count; ++j)
    sum += delta::checksum_term(delta_load_word(d.current, d.bytes, first + j),
                                static_cast<std::uint64_t>(first + j));
  return sum;
}

// Element `index` (W bytes) of `p`.
template <int W>
REFIT_HOST_DEVICE std::uint64_t delta_load_element(const std::byte* p, std::int64_t index) {
  return delta_load_bytes(p + index * W, W);
}

// Encoding, pass 2: the lane's bytes of the mask and, for each changed element, the bytes of its
// XOR into the planes at its rank (`rank`: the lane's first).
template <int W>
REFIT_HOST_DEVICE void delta_write_lane(const DeltaLanes& d, std::int64_t lane, std::uint64_t rank) {
  const std::uint64_t mask = d.mask[lane];
  const std::int64_t mask_bytes = delta_mask_bytes(d.elements);
  REFIT_UNROLL
  for (int q = 0; q < 8; ++q)
    if (lane * 8 + q < mask_bytes) d.body[lane * 8 + q] = static_cast<std::byte>(mask >> (8 * q));
  std::byte* planes = d.body + mask_bytes;
  const auto count = static_cast<std::uint64_t>(d.changed);
  for (std::uint64_t bits = mask; bits != 0; bits &= bits - 1, ++rank) {
    const std::int64_t i = lane * kDeltaLaneElements + delta_lowest_bit(bits);
    const std::uint64_t x = delta_load_element<W>(d.baseline, i) ^ delta_load_element<W>(d.current, i);
    REFIT_UNROLL
    for (int p = 0; p < W; ++p) planes[p * count + rank] = static_cast<std::byte>(x >> (8 * p));
  }
}

// Decoding: lane `lane`'s word of the payload's mask (its bytes past the mask's end read as 0).
REFIT_HOST_DEVICE std::uint64_t delta_payload_mask(const DeltaLanes& d, std::int64_t lane) {
  const std::int64_t mask_bytes = delta_mask_bytes(d.elements);
  const std::int64_t left = mask_bytes - lane * 8;
  return delta_load_bytes(d.mask_in + lane * 8, left < 8 ? left : 8);
}

// Decoding, pass 1: the lane's set bits, and whether any lies past the chunk's last element.
struct DeltaLaneCount {
  std::uint64_t bits = 0;
  std::uint64_t past_end = 0;  // 1 when the lane has a bit past the chunk's end
};
REFIT_HOST_DEVICE DeltaLaneCount delta_count_lane(const DeltaLanes& d, std::int64_t lane) {
  const std::uint64_t mask = delta_payload_mask(d, lane);
  const std::int64_t valid = d.elements - lane * kDeltaLaneElements;  // >= 1
  const bool past = valid < kDeltaLaneElements && (mask >> valid) != 0;
  return {delta_popcount(mask), past ? 1u : 0u};
}

// The XOR of changed element `rank` from the payload's planes.
template <int W>
REFIT_HOST_DEVICE std::uint64_t delta_plane_value(const DeltaLanes& d, std::uint64_t rank) {
  const auto count = static_cast<std::uint64_t>(d.changed);
  std::uint64_t x = 0;
  REFIT_UNROLL
  for (int p = 0; p < W; ++p) x |= static_cast<std::uint64_t>(d.planes_in[p * count + rank]) << (8 * p);
  return x;
}

// Decoding, pass 2 (writing nothing): the change of the receiver's checksum once the lane's
// changes are applied, sum over the changed words of term(before ^ xor) - term(before). Runs only
// after pass 1 found exactly `changed` bits, none past the end, so every rank is a plane's.
template <int W>
REFIT_HOST_DEVICE std::uint64_t delta_check_lane(const DeltaLanes& d, std::int64_t lane, std::uint64_t rank) {
  constexpr int kPerWord = 8 / W;
  std::uint64_t sum = 0;
  std::int64_t word = -1;
  std::uint64_t x = 0;
  const auto flush = [&] {
    if (word < 0) return;
    const std::uint64_t before = delta_load_word(d.target, d.bytes, word);
    sum += delta::checksum_term(before ^ x, static_cast<std::uint64_t>(word)) -
           delta::checksum_term(before, static_cast<std::uint64_t>(word));
  };
  for (std::uint64_t bits = delta_payload_mask(d, lane); bits != 0; bits &= bits - 1, ++rank) {
    const std::int64_t i = lane * kDeltaLaneElements + delta_lowest_bit(bits);
    if (i / kPerWord != word) {
      flush();
      word = i / kPerWord;
      x = 0;
    }
    x |= delta_plane_value<W>(d, rank) << (8 * W * (i % kPerWord));
  }
  flush();
  return sum;
}

// Decoding, pass 3 (only once the result's checksum is the sender's): XORs the lane's changes in.
template <int W>
REFIT_HOST_DEVICE void delta_apply_lane(const DeltaLanes& d, std::int64_t lane, std::uint64_t rank) {
  for (std::uint64_t bits = delta_payload_mask(d, lane); bits != 0; bits &= bits - 1, ++rank) {
    const std::int64_t i = lane * kDeltaLaneElements + delta_lowest_bit(bits);
    const std::uint64_t x = delta_plane_value<W>(d, rank);
    REFIT_UNROLL
    for (int p = 0; p < W; ++p)
      d.target[i * W + p] =
          static_cast<std::byte>(static_cast<std::uint64_t>(d.target[i * W + p]) ^ (x >> (8 * p)));
  }
}

// The lanes of tile `tile`: [first, end).
REFIT_HOST_DEVICE void delta_tile_lanes(const DeltaLanes& d, std::int64_t tile, std::int64_t& first,
                                        std::int64_t& end) {
  first = tile * kDeltaTileLanes;
  end = first + kDeltaTileLanes < d.lanes ? first + kDeltaTileLanes : d.lanes;
}

// f(std::integral_constant<int, W>{}) for the element size `element_bytes` (1, 2, 4 or 8, which
// read_delta_header and dtype_size guarantee), so that each pass is compiled once per width.
template <class F>
decltype(auto) with_delta_width(std::int64_t element_bytes, F&& f) {
  if (element_bytes == 1) return f(std::integral_constant<int, 1>{});
  if (element_bytes == 2) return f(std::integral_constant<int, 2>{});
  if (element_bytes == 4) return f(std::integral_constant<int, 4>{});
  return f(std::integral_constant<int, 8>{});
}

// ---- The kernels' work on the host: every tile, every lane in the kernels' own mapping; the
// block scans and reductions as sequential loops over the lanes in order.

// Tile counts into exclusive offsets (in place) and the totals; what the prefix kernel does.
inline DeltaTotals delta_tile_prefix_on_host(const DeltaLanes& d) {
  DeltaTotals t;
  for (std::int64_t tile = 0; tile < d.tiles; ++tile) {
    const std::uint64_t count = d.tile_count[tile];
    d.tile_count[tile] = t.count;
    t.count += count;
    t.sum += d.tile_sum[tile];
  }
  d.totals[0] = t.count;
  d.totals[1] = t.sum;
  return t;
}

// Per tile: f(lane) -> (count, sum), reduced into the tile arrays.
template <class F>
void delta_reduce_tiles_on_host(const DeltaLanes& d, F f) {
  for (std::int64_t tile = 0; tile < d.tiles; ++tile) {
    std::int64_t first = 0, end = 0;
    delta_tile_lanes(d, tile, first, end);
    DeltaTotals t;
    for (std::int64_t lane = first; lane < end; ++lane) {
      const DeltaTotals l = f(lane);
      t.count += l.count;
      t.sum += l.sum;
    }
    d.tile_count[tile] = t.count;
    d.tile_sum[tile] = t.sum;
  }
}

// Per tile, lanes in order with their first rank: the tile's offset plus the lanes' before it in
// the tile; f(lane, rank) returns what it adds to the tile's sum, count(lane) the lane's count.
template <class Count, class F>
void delta_ranked_lanes_on_host(const DeltaLanes& d, Count count, F f) {
  for (std::int64_t tile = 0; tile < d.tiles; ++tile) {
    std::int64_t first = 0, end = 0;
    delta_tile_lanes(d, tile, first, end);
    std::uint64_t rank = d.tile_count[tile];
    std::uint64_t sum = 0;
    for (std::int64_t lane = first; lane < end; ++lane) {
      sum += f(lane, rank);
      rank += count(lane);
    }
    d.tile_sum[tile] = sum;
  }
}

}  // namespace refit::nccl_detail
