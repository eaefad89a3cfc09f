#pragma once
// A strided box copy as the translation describes it (elements, positions in buffers) and as the
// kernel runs it (copy_kernel_body.h: bytes or units, pointers). make_device_copy moves rows
// contiguous on both sides as runs of bytes (16 bytes a store at any alignment) unless they are
// short and misaligned, and everything else unit by unit in the widest unit the addresses,
// strides and range allow.
#include <cstdint>
#include <span>

#include "copy_kernel_body.h"
#include "refit/lowering/arrays.h"

namespace refit::nccl_detail {

struct CopyGeometry {
  std::int32_t dims = 1;          // merged: no dim of extent 1, no two dims contiguous in both
  std::int32_t element_size = 1;  // bytes: 1, 2, 4 or 8
  std::int64_t extent[kMaxCopyDims] = {};
  std::int64_t src_stride[kMaxCopyDims] = {};  // in elements
  std::int64_t dst_stride[kMaxCopyDims] = {};
  std::int64_t first = 0;  // elements [first, first + count) of the box, row-major
  std::int64_t count = 0;
  bool operator==(const CopyGeometry&) const = default;
};

struct PlannedCopy {
  std::int64_t src_offset = 0;  // bytes into each buffer of the first element of `x`
  std::int64_t dst_offset = 0;
  CopyGeometry geometry;
};
// Copies elements [first, first + count) of box `x` (inside both arrays) from `src` to `dst`: the
// lowering's walk of x over the two arrays, as the kernel takes it.
PlannedCopy plan_copy(const lowering::Array& src, const lowering::Array& dst, const Box& x,
                      std::int64_t first, std::int64_t count, std::int64_t element_size);

// The bytes a copy touches, relative to each origin: [begin, end). Strides are positive and
// row-major, so the range's first element lies nearest and its last furthest. The origin itself
// may lie outside (a box whose range starts mid-way, packed into staging).
struct CopyReach {
  std::int64_t src_begin = 0;
  std::int64_t src_end = 0;
  std::int64_t dst_begin = 0;
  std::int64_t dst_end = 0;
};
CopyReach copy_reach(const CopyGeometry& g);

DeviceCopy make_device_copy(const CopyGeometry& g, const std::byte* src, std::byte* dst);

// Numbers the items of a batch (sets item_begin) and returns how many there are in all.
std::int64_t number_items(std::span<DeviceCopy> batch);

// Runs a numbered batch on the host exactly as the kernel does, item by item and thread by thread.
void run_batch_on_host(std::span<const DeviceCopy> batch);

}  // namespace refit::nccl_detail
