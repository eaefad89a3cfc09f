#pragma once
// The work of the GPU delta codec's kernels, written once for both compilers: nvcc runs it on the
// GPU and the CPU tests (tests/executors/nccl/delta_kernel_test.cc) run the very same functions
// lane by lane (HostDeltaKernels, with the *_on_host loops below in place of the block scans),
// comparing every payload with refit::DeltaCodec's bit for bit. The encodings are delta/'s
// (docs/delta.md): dense, the bitmask (bit i of the mask set when element i changed, then the
// changed elements' XOR with the baseline as byte planes) and runs (run_positions.h, then the same
// planes); the checksum is delta/'s checksum_term summed with wrapping adds, so that any order of
// the sum gives checksum_of's value. C++20 only (nvcc compiles it).
//
// A chunk is cut into lanes of 64 elements, one 64-bit word of the mask each, and lanes into
// tiles of kDeltaTileLanes (one thread block). A pass runs every lane independently; the tiles'
// results are reduced per tile (a block reduction on the GPU) into the workspace's tile arrays,
// and a one-block prefix turns the tiles' counts into exclusive offsets and the totals the host
// reads back. A changed element's place among the planes (its rank) is its tile's offset, its
// lane's offset in the tile (an exclusive scan of the lanes' counts) and its place in the lane;
// a run's place among the positions likewise. Decoding runs turns them into a mask first (below),
// which then applies as a bitmask body's does.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "host_device.h"
#include "refit/delta/checksum.h"
#include "refit/delta/run_positions.h"

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
  const std::byte* positions_in = nullptr;  // runs
  // Encoding: the bitmask body (mask, then planes) written by delta_write_lane.
  std::byte* body = nullptr;
  // Workspace: a mask word per lane (encoding; decoding runs: the mask they make), two carries per
  // lane (runs), a count, a sum and a count of position bytes per tile, three totals.
  std::uint64_t* mask = nullptr;
  std::uint64_t* lane_before = nullptr;  // runs: the end of the changes before the lane (last + 1, or 0)
  std::uint64_t* lane_after = nullptr;   // runs: the first unchanged element after the lane (or elements)
  std::uint64_t* tile_count = nullptr;
  std::uint64_t* tile_sum = nullptr;
  std::uint64_t* tile_positions = nullptr;  // runs: position bytes per tile, then their offsets
  std::uint64_t* totals = nullptr;          // [count, sum, flags] once a prefix has run
  std::int64_t bytes = 0;                   // the chunk's
  std::int64_t elements = 0;
  std::int64_t lanes = 0;
  std::int64_t tiles = 0;
  std::int64_t changed = 0;    // the planes' count of values (writing and reading them)
  std::int64_t positions = 0;  // runs: the position bytes before the planes
  std::int32_t element_bytes = 1;
};

// The totals the host reads back after a pass and delta_tile_prefix.
struct DeltaTotals {
  std::uint64_t count = 0;  // changed elements, set bits of a payload's mask, or position bytes
  std::uint64_t sum = 0;    // checksum terms' sum, lanes with bits past the end (counting a mask),
                            // or the end of the last run (reading runs)
  std::uint64_t flags = 0;  // reading runs: nonzero when they are not well-formed
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
REFIT_HOST_DEVICE int delta_highest_bit(std::uint64_t w) {
#if defined(__CUDA_ARCH__)
  return 63 - __clzll(static_cast<long long>(w));
#else
  return 63 - std::countl_zero(w);
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

// ---- The runs encoding (refit/delta/run_positions.h): positions, then the planes as bitmask's.

// Lane `lane`'s part of the runs' carries: the end of its last change (last changed + 1, or 0)
// and its first unchanged element (past the chunk's end for the last lane; kDeltaNone when every
// element of the lane changed).
inline constexpr std::uint64_t kDeltaNone = ~std::uint64_t{0};
REFIT_HOST_DEVICE std::uint64_t delta_lane_last_end(const DeltaLanes& d, std::int64_t lane) {
  const std::uint64_t m = d.mask[lane];
  return m == 0 ? 0 : static_cast<std::uint64_t>(lane * kDeltaLaneElements + delta_highest_bit(m) + 1);
}
REFIT_HOST_DEVICE std::uint64_t delta_lane_first_clear(const DeltaLanes& d, std::int64_t lane) {
  const std::uint64_t m = d.mask[lane];  // 0 past the chunk's end, so its last lane always has one
  return ~m == 0 ? kDeltaNone : static_cast<std::uint64_t>(lane * kDeltaLaneElements + delta_lowest_bit(~m));
}

// Calls f(Run) for each run that starts in lane `lane`, in order, after the carries are known:
// its gap from the previous change's end (in this lane, or lane_before) and its length to the
// first unchanged element (in this lane, or lane_after).
template <class F>
REFIT_HOST_DEVICE void delta_lane_runs(const DeltaLanes& d, std::int64_t lane, F&& f) {
  const std::uint64_t m = d.mask[lane];
  const std::int64_t base = lane * kDeltaLaneElements;
  const auto before = static_cast<std::int64_t>(d.lane_before[lane]);
  const std::uint64_t carried = base > 0 && before == base ? 1 : 0;  // element base - 1 changed
  for (std::uint64_t starts = m & ~((m << 1) | carried); starts != 0; starts &= starts - 1) {
    const int e = delta_lowest_bit(starts);
    const std::uint64_t below = m & ((std::uint64_t{1} << e) - 1);
    const std::int64_t end = below != 0 ? base + delta_highest_bit(below) + 1 : before;
    const std::uint64_t rest = ~m >> e;
    const std::int64_t length =
        rest != 0 ? delta_lowest_bit(rest) : static_cast<std::int64_t>(d.lane_after[lane]) - (base + e);
    f(delta::Run{.gap = base + e - end, .length = length});
  }
}

// Encoding runs, pass 2: the lane's position bytes.
REFIT_HOST_DEVICE std::uint64_t delta_position_bytes_lane(const DeltaLanes& d, std::int64_t lane) {
  std::uint64_t bytes = 0;
  delta_lane_runs(d, lane, [&](const delta::Run& run) {
    bytes += static_cast<std::uint64_t>(delta::run_position_bytes(run));
  });
  return bytes;
}

// Encoding runs, pass 3: the lane's runs at `at` among the positions, its changes' XORs into the
// planes (after the positions) from `rank`.
template <int W>
REFIT_HOST_DEVICE void delta_write_runs_lane(const DeltaLanes& d, std::int64_t lane, std::uint64_t at,
                                             std::uint64_t rank) {
  std::byte* out = d.body + at;
  delta_lane_runs(d, lane, [&](const delta::Run& run) { out = delta::put_run(out, run); });
  std::byte* planes = d.body + d.positions;
  const auto count = static_cast<std::uint64_t>(d.changed);
  for (std::uint64_t bits = d.mask[lane]; bits != 0; bits &= bits - 1, ++rank) {
    const std::int64_t i = lane * kDeltaLaneElements + delta_lowest_bit(bits);
    const std::uint64_t x = delta_load_element<W>(d.baseline, i) ^ delta_load_element<W>(d.current, i);
    REFIT_UNROLL
    for (int p = 0; p < W; ++p) planes[p * count + rank] = static_cast<std::byte>(x >> (8 * p));
  }
}

// Decoding runs: the positions are cut into segments of kDeltaSegmentBytes; a varint belongs to
// the segment its first byte lies in. A segment's walk from a state (expecting a run's head, or
// the length its head promised) says where it leaves: the state, how far it moved the element
// position (gaps and lengths), the values its runs hold, whether a varint was bad. Walks compose
// (delta_then), so a scan over the segments gives each its entry state and position.
inline constexpr std::int64_t kDeltaSegmentBytes = 64;
inline constexpr std::uint64_t kDeltaCap = std::uint64_t{1} << 62;  // sums saturate here: a bad body

struct DeltaWalk {
  std::uint64_t advance = 0;
  std::uint64_t values = 0;
  std::uint32_t state = 0;  // 0: a head next, 1: a length next
  std::uint32_t bad = 0;
};
// A segment's walks from either state: the composable unit of the scan.
struct DeltaWalks {
  DeltaWalk from[2] = {{0, 0, 0, 0}, {0, 0, 1, 0}};  // the identity: nothing walked
};

REFIT_HOST_DEVICE std::uint64_t delta_saturate(std::uint64_t a, std::uint64_t b) {
  return a + b < kDeltaCap ? a + b : kDeltaCap;  // a, b <= kDeltaCap: no wrap
}

// `first`, then `second`.
REFIT_HOST_DEVICE DeltaWalks delta_then(const DeltaWalks& first, const DeltaWalks& second) {
  DeltaWalks out;
  for (int s = 0; s < 2; ++s) {
    const DeltaWalk& a = first.from[s];
    const DeltaWalk& b = second.from[a.state];
    out.from[s] = DeltaWalk{delta_saturate(a.advance, b.advance), delta_saturate(a.values, b.values), b.state,
                            a.bad | b.bad};
  }
  return out;
}

REFIT_HOST_DEVICE std::int64_t delta_segments_of(std::int64_t positions) {
  return (positions + kDeltaSegmentBytes - 1) / kDeltaSegmentBytes;
}

// Walks segment `segment` of the positions at d.positions_in from `state`, the element position at `at`;
// emit(start, length) for each run it completes.
template <class Emit>
REFIT_HOST_DEVICE DeltaWalk delta_walk_segment(const DeltaLanes& d, std::int64_t segment, std::uint32_t state,
                                               std::uint64_t at, Emit&& emit) {
  const std::byte* p = d.positions_in;
  std::int64_t b = segment * kDeltaSegmentBytes;
  const std::int64_t end = b + kDeltaSegmentBytes < d.positions ? b + kDeltaSegmentBytes : d.positions;
  while (b > 0 && b < end && static_cast<std::uint8_t>(p[b - 1]) >= 0x80) ++b;  // inside the previous one
  DeltaWalk w{0, 0, state, 0};
  while (b < end) {
    std::uint64_t v = 0;
    const std::int64_t took = delta::read_varint(p + b, d.positions - b, v);
    if (took == 0) {
      w.bad = 1;
      break;
    }
    b += took;
    if (w.state == 0) {
      w.advance = delta_saturate(w.advance, (v >> 1) < kDeltaCap ? v >> 1 : kDeltaCap);
      if ((v & 1) != 0) {
        w.state = 1;
        continue;
      }
      emit(at + w.advance, std::uint64_t{1});
      w.advance = delta_saturate(w.advance, 1);
      w.values = delta_saturate(w.values, 1);
    } else {
      const std::uint64_t length = v < kDeltaCap - 2 ? v + 2 : kDeltaCap;
      emit(at + w.advance, length);
      w.advance = delta_saturate(w.advance, length);
      w.values = delta_saturate(w.values, length);
      w.state = 0;
    }
  }
  return w;
}

// An emit of delta_walk_segment that does nothing (the walks' first pass).
struct DeltaIgnoreRuns {
  REFIT_HOST_DEVICE void operator()(std::uint64_t, std::uint64_t) const {}
};

REFIT_HOST_DEVICE DeltaWalks delta_walks_of_segment(const DeltaLanes& d, std::int64_t segment) {
  DeltaWalks w;
  w.from[0] = delta_walk_segment(d, segment, 0, 0, DeltaIgnoreRuns{});
  w.from[1] = delta_walk_segment(d, segment, 1, 0, DeltaIgnoreRuns{});
  return w;
}

// An emit of delta_walk_segment that sets the mask bits of each run in d.mask when it lies within
// the chunk (the totals refuse a body with one that does not). Runs of different segments may
// share a mask word: the GPU ORs atomically.
struct DeltaMarkRuns {
  const DeltaLanes& d;
  REFIT_HOST_DEVICE void set(std::uint64_t word, std::uint64_t bits) const {
#if defined(__CUDA_ARCH__)
    atomicOr(reinterpret_cast<unsigned long long*>(d.mask + word), static_cast<unsigned long long>(bits));
#else
    d.mask[word] |= bits;
#endif
  }
  REFIT_HOST_DEVICE void operator()(std::uint64_t start, std::uint64_t length) const {
    const auto n = static_cast<std::uint64_t>(d.elements);
    if (start >= n || length > n - start) return;
    for (std::uint64_t i = start; i < start + length;) {
      const std::uint64_t bit = i % kDeltaLaneElements;
      const std::uint64_t left = start + length - i;
      const std::uint64_t take = left < kDeltaLaneElements - bit ? left : kDeltaLaneElements - bit;
      set(i / kDeltaLaneElements, (take == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << take) - 1) << bit);
      i += take;
    }
  }
};

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

// `counts` (per tile) into exclusive offsets in place, and the totals with the sum of `sums` (if
// given); what the prefix kernel does.
inline DeltaTotals delta_tile_prefix_on_host(const DeltaLanes& d, std::uint64_t* counts,
                                             const std::uint64_t* sums) {
  DeltaTotals t;
  for (std::int64_t tile = 0; tile < d.tiles; ++tile) {
    const std::uint64_t count = counts[tile];
    counts[tile] = t.count;
    t.count += count;
    t.sum += sums != nullptr ? sums[tile] : 0;
  }
  d.totals[0] = t.count;
  d.totals[1] = t.sum;
  d.totals[2] = 0;
  return t;
}

// The runs' carries of every lane; what the carries kernel does.
inline void delta_lane_carries_on_host(const DeltaLanes& d) {
  std::uint64_t before = 0;
  for (std::int64_t lane = 0; lane < d.lanes; ++lane) {
    d.lane_before[lane] = before;
    const std::uint64_t end = delta_lane_last_end(d, lane);
    before = end > before ? end : before;
  }
  auto after = static_cast<std::uint64_t>(d.elements);
  for (std::int64_t lane = d.lanes - 1; lane >= 0; --lane) {
    d.lane_after[lane] = after;
    const std::uint64_t clear = delta_lane_first_clear(d, lane);
    after = clear < after ? clear : after;
  }
}

// Decoding runs: the segments' walks scanned in order, each segment walked from its entry marking
// its runs in d.mask (zero before); the totals: values, the last run's end, and bad or unfinished.
inline DeltaTotals delta_runs_to_mask_on_host(const DeltaLanes& d) {
  DeltaWalks before;
  for (std::int64_t segment = 0; segment < delta_segments_of(d.positions); ++segment) {
    const DeltaWalk& entry = before.from[0];
    delta_walk_segment(d, segment, entry.state, entry.advance, DeltaMarkRuns{d});
    before = delta_then(before, delta_walks_of_segment(d, segment));
  }
  const DeltaWalk& all = before.from[0];
  return DeltaTotals{all.values, all.advance, all.bad | all.state};
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
