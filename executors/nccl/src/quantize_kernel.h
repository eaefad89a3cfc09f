#pragma once
// Quantizes a block-aligned bf16 box in device memory into fp8 values and scales on a stream
// (quantize_kernel_body.h; the same bytes as refit::quantize on the CPU).
#include <cstdint>

#include <cuda_runtime_api.h>

#include "refit/core/quant_scheme.h"

namespace refit::nccl_detail {

// `src`: the box's first element (a block corner) in device memory, `shape` and `strides` (in
// elements) of its `dims` dims (2..kMaxQuantizeDims); `values` (row-major, one byte per element)
// and `scales` (row-major over quant_scale_shape(scheme, shape), quant_scale_dtype(scheme)) in device memory.
// cudaErrorInvalidValue when dims is out of range.
cudaError_t launch_quantize(QuantScheme scheme, const std::uint16_t* src, const std::int64_t* shape,
                            const std::int64_t* strides, int dims, std::uint8_t* values, void* scales,
                            cudaStream_t stream);

}  // namespace refit::nccl_detail
