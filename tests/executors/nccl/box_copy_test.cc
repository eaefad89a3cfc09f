// The copy geometry and the kernel's item code against brute force. The kernel body runs here on
// the host exactly as on the GPU (copy_kernel_body.h), so these tests check its index arithmetic,
// the choice between byte runs and units, the shifted 16-byte words of misaligned runs and the
// thread split without a GPU.
#include <algorithm>
#include <random>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "device_copy.h"
#include "random_boxes.h"
#include "refit/lowering/arrays.h"

namespace refit::nccl_detail {
namespace {

using lowering::row_major_index;

using Random = refit::testing::RandomBoxes;
using lowering::point_at;

struct Case {
  std::int64_t es;
  Box src_array, dst_array, x;
  std::int64_t first, count, src_base, dst_base;
};

Case random_case(Random& r) {
  const auto dims = static_cast<std::size_t>(r.uniform(1, 4));
  Case c;
  c.es = std::int64_t{1} << r.uniform(0, 3);
  // Rows of up to 80 elements in one or two dims, so that misaligned runs of 64 bytes and more
  // (moved as shifted 16-byte words) occur as well as short ones (moved unit by unit).
  const Box outer = r.box(dims, dims <= 2 && r.uniform(0, 1) ? 80 : 7);
  c.x = r.inside(outer);
  // Arrays holding x; sometimes exactly x (contiguous), sometimes larger (strided).
  c.src_array = r.uniform(0, 2) == 0 ? c.x : outer;
  c.dst_array = r.uniform(0, 2) == 0 ? c.x : r.inside(outer);
  for (std::size_t d = 0; d < dims; ++d) {
    const auto lo = std::min(c.dst_array.offset[d], c.x.offset[d]);
    const auto hi = std::max(c.dst_array.offset[d] + c.dst_array.extent[d], c.x.offset[d] + c.x.extent[d]);
    c.dst_array.offset[d] = lo;
    c.dst_array.extent[d] = hi - lo;
  }
  c.first = r.uniform(0, c.x.volume() - 1);
  c.count = r.uniform(1, c.x.volume() - c.first);
  // Bases aligned to the element, and to 16 bytes half of the time, so every unit width occurs.
  c.src_base = r.uniform(0, 1) ? 16 * r.uniform(0, 2) : c.es * r.uniform(0, 5);
  c.dst_base = r.uniform(0, 1) ? 16 * r.uniform(0, 2) : c.es * r.uniform(0, 5);
  return c;
}

// How a copy moves: "bytes", "bytes shifted" (source and destination apart by no multiple of
// 16) or "units of N".
std::string path_of(const DeviceCopy& c) {
  if (c.mode == CopyMode::kElements) return "units of " + std::to_string(c.unit);
  const auto apart = reinterpret_cast<std::uintptr_t>(c.src) - reinterpret_cast<std::uintptr_t>(c.dst);
  return apart % 16 == 0 ? "bytes" : "bytes shifted";
}

TEST(BoxCopy, KernelItemCodeMatchesBruteForce) {
  Random r(2);
  std::set<std::string> paths;
  for (int i = 0; i < 4000; ++i) {
    const Case c = random_case(r);
    const auto src_bytes = c.src_base + c.src_array.volume() * c.es;
    const auto dst_bytes = c.dst_base + c.dst_array.volume() * c.es;
    // operator new aligns to 16 bytes, so the bases above decide the alignment.
    std::vector<std::byte> src(static_cast<std::size_t>(src_bytes)), dst(static_cast<std::size_t>(dst_bytes));
    for (std::size_t k = 0; k < src.size(); ++k) src[k] = static_cast<std::byte>(k * 7 + 3);
    auto want = dst;
    // Brute force: element e of x's range goes from its place in src to its place in dst.
    for (auto e = c.first; e < c.first + c.count; ++e) {
      const auto p = point_at(c.x, e);
      const auto from = c.src_base + row_major_index(c.src_array, p) * c.es;
      const auto to = c.dst_base + row_major_index(c.dst_array, p) * c.es;
      std::copy_n(src.begin() + from, c.es, want.begin() + to);
    }
    const auto planned = plan_copy(lowering::Array{c.src_base, &c.src_array},
                                   lowering::Array{c.dst_base, &c.dst_array}, c.x, c.first, c.count, c.es);
    std::vector<DeviceCopy> batch{
        make_device_copy(planned.geometry, src.data() + planned.src_offset, dst.data() + planned.dst_offset)};
    paths.insert(path_of(batch[0]));
    number_items(batch);
    run_batch_on_host(batch);
    ASSERT_EQ(dst, want) << "case " << i << ": x " << c.x.to_string() << " in " << c.src_array.to_string()
                         << " -> " << c.dst_array.to_string() << ", elements [" << c.first << ", +" << c.count
                         << "), " << c.es << "-byte, " << path_of(batch[0]);
    // copy_reach bounds exactly the bytes touched (relative to the origins).
    const auto reach = copy_reach(planned.geometry);
    const auto first = point_at(c.x, c.first);
    const auto last = point_at(c.x, c.first + c.count - 1);
    EXPECT_EQ(planned.dst_offset + reach.dst_begin, c.dst_base + row_major_index(c.dst_array, first) * c.es);
    EXPECT_EQ(planned.dst_offset + reach.dst_end,
              c.dst_base + (row_major_index(c.dst_array, last) + 1) * c.es);
  }
  // Every path was exercised.
  EXPECT_EQ(paths, (std::set<std::string>{"bytes", "bytes shifted", "units of 1", "units of 2", "units of 4",
                                          "units of 8"}));
}

TEST(BoxCopy, LongRowsAreCutIntoTilesOfTheBlock) {
  // Rows of up to 5000 elements: several tiles of kCopyThreads * kCopyUnroll units per row, and
  // ranges that start and end inside a tile.
  Random r(5);
  for (int i = 0; i < 200; ++i) {
    const auto es = std::int64_t{1} << r.uniform(0, 3);
    const Box array{{0, 0}, {3, r.uniform(1000, 5000)}};
    const Box x = r.inside(array);
    const auto first = r.uniform(0, x.volume() - 1);
    const auto count = r.uniform(1, x.volume() - first);
    std::vector<std::byte> src(static_cast<std::size_t>(array.volume() * es)),
        dst(static_cast<std::size_t>(x.volume() * es));
    for (std::size_t k = 0; k < src.size(); ++k) src[k] = static_cast<std::byte>(k * 31 + 7);
    auto want = dst;
    for (auto e = first; e < first + count; ++e)
      std::copy_n(src.begin() + row_major_index(array, point_at(x, e)) * es, es, want.begin() + e * es);
    const auto p = plan_copy(lowering::Array{.offset = 0, .box = &array},
                             lowering::Array{.offset = 0, .box = &x}, x, first, count, es);
    std::vector<DeviceCopy> batch{
        make_device_copy(p.geometry, src.data() + p.src_offset, dst.data() + p.dst_offset)};
    number_items(batch);
    run_batch_on_host(batch);
    ASSERT_EQ(dst, want) << "case " << i << ": " << x.to_string() << " of " << array.to_string() << ", "
                         << path_of(batch[0]);
  }
}

TEST(BoxCopy, ABatchOfCopiesRunsAsOne) {
  // Three copies of different widths into disjoint parts of one buffer, numbered as one batch.
  std::vector<std::byte> src(4096), dst(4096), want(4096);
  for (std::size_t k = 0; k < src.size(); ++k) src[k] = static_cast<std::byte>(k * 13 + 1);
  std::vector<DeviceCopy> batch;
  for (int k = 0; k < 3; ++k) {
    const Box array{{0, 0}, {40, 9}};
    const Box x{{3, 1}, {30, 5 + k}};
    const auto es = std::int64_t{2} << k;
    const auto base = 1024 * k;
    const auto p = plan_copy(lowering::Array{.offset = 0, .box = &array},
                             lowering::Array{.offset = base, .box = &x}, x, 0, x.volume(), es);
    batch.push_back(make_device_copy(p.geometry, src.data() + p.src_offset, dst.data() + p.dst_offset));
    for (std::int64_t e = 0; e < x.volume(); ++e)
      std::copy_n(src.begin() + row_major_index(array, point_at(x, e)) * es, es,
                  want.begin() + base + e * es);
  }
  EXPECT_EQ(number_items(batch), batch[0].items + batch[1].items + batch[2].items);
  run_batch_on_host(batch);
  EXPECT_EQ(dst, want);
}

TEST(BoxCopy, RunsMoveAsSixteenByteWordsAtAnyAlignment) {
  // A [64, 128] bf16 array: rows of its boxes are contiguous on both sides.
  alignas(16) std::byte src[64 * 128 * 2];
  alignas(16) std::byte dst[32 * 128 * 2];
  const Box array{{0, 0}, {64, 128}};
  const auto device_copy = [&](const Box& x) {
    const auto p = plan_copy(lowering::Array{.offset = 0, .box = &array},
                             lowering::Array{.offset = 0, .box = &x}, x, 0, x.volume(), 2);
    return make_device_copy(p.geometry, src + p.src_offset, dst + p.dst_offset);
  };
  // Columns 32..96: 128-byte runs, 16-byte aligned on both sides: 8 words a row, 8 lanes a row,
  // 32 rows a pass, so one item (kCopySlots passes) covers all 32 rows.
  const auto aligned = device_copy(Box{{8, 32}, {32, 64}});
  EXPECT_EQ(aligned.mode, CopyMode::kBytes);
  EXPECT_EQ(aligned.row_length, 128);
  EXPECT_EQ(aligned.src_stride[0], 128 * 2);
  EXPECT_EQ(1 << aligned.lanes_log2, 8);
  EXPECT_EQ(aligned.items, 1);
  // Odd columns: 126-byte runs at odd 2-byte offsets, still 16-byte stores (shifted words).
  EXPECT_EQ(device_copy(Box{{8, 33}, {32, 63}}).mode, CopyMode::kBytes);
  // Short misaligned runs (10 bytes) move in the widest unit that fits: 2 bytes.
  const auto short_runs = device_copy(Box{{8, 33}, {32, 5}});
  EXPECT_EQ(short_runs.mode, CopyMode::kElements);
  EXPECT_EQ(short_runs.unit, 2);
}

TEST(BoxCopy, APartOfALongRowMakesOnlyTheItemsItNeeds) {
  // 1000 elements from the middle of a contiguous row of 2^26 int32 (a chunk of a large weight):
  // one item (4000 bytes: 250 words over 256 lanes), not one per tile of the whole row. Then a
  // range over three long rows: its part of the first row, one whole row and its part of the last.
  const Box row{{0}, {std::int64_t{1} << 26}};
  const auto p = plan_copy(lowering::Array{.offset = 0, .box = &row},
                           lowering::Array{.offset = 0, .box = &row}, row, 40000000, 1000, 4);
  EXPECT_EQ(make_device_copy(p.geometry, nullptr, nullptr).items, 1);
  const Box rows{{0, 0}, {3, 1 << 20}};
  const Box x{{0, 0}, {3, 1 << 19}};
  const auto q = plan_copy(lowering::Array{.offset = 0, .box = &rows},
                           lowering::Array{.offset = 0, .box = &x}, x, (1 << 19) - 4096, (1 << 19) + 8192, 4);
  // 32 KiB a tile (256 lanes x 8 slots x 16 bytes): 1 tile of the first row's 16 KiB, 64 of the
  // whole 2 MiB row, 1 of the last row's 16 KiB.
  static_assert(kCopyThreads * kCopySlots * 16 == 32 << 10);
  EXPECT_EQ(make_device_copy(q.geometry, nullptr, nullptr).items, 1 + 64 + 1);
}

TEST(BoxCopy, MergesDimsContiguousInBothArrays) {
  // Full rows of a [10, 4, 6] array into a box-shaped array: one contiguous run of 3*4*6.
  const Box array{{0, 0, 0}, {10, 4, 6}};
  const Box x{{2, 0, 0}, {3, 4, 6}};
  const auto p = plan_copy(lowering::Array{.offset = 0, .box = &array},
                           lowering::Array{.offset = 0, .box = &x}, x, 0, x.volume(), 4);
  EXPECT_EQ(p.geometry.dims, 1);
  EXPECT_EQ(p.geometry.extent[0], 72);
  EXPECT_EQ(p.src_offset, 2 * 24 * 4);
  // A column: dims of extent 1 drop out, the stride stays.
  const Box column{{0, 2, 3}, {10, 1, 1}};
  const auto q = plan_copy(lowering::Array{.offset = 0, .box = &array},
                           lowering::Array{.offset = 0, .box = &column}, column, 0, 10, 4);
  EXPECT_EQ(q.geometry.dims, 1);
  EXPECT_EQ(q.geometry.src_stride[0], 24);
  EXPECT_EQ(q.geometry.dst_stride[0], 1);
}

}  // namespace
}  // namespace refit::nccl_detail
