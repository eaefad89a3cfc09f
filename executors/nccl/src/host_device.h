#pragma once
// What code compiled by both nvcc and the host compiler (the kernels' bodies, which the CPU tests
// run) needs to say to nvcc alone.

// Functions of both, inline (they live in headers), and inlined into the kernels: a call would
// spill the caller's registers around it.
#if defined(__CUDACC__)
#define REFIT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define REFIT_HOST_DEVICE inline
#endif

// Functions of both that stay out of line in the kernels: rare paths, which would bloat every
// place they are called from.
#if defined(__CUDACC__)
#define REFIT_HOST_DEVICE_OUTLINED __host__ __device__ __noinline__
#else
#define REFIT_HOST_DEVICE_OUTLINED inline
#endif

// Loops over a thread's registers are unrolled on the GPU: a run-time index would put the
// registers in local memory.
#if defined(__CUDA_ARCH__)
#define REFIT_UNROLL _Pragma("unroll")
#else
#define REFIT_UNROLL
#endif
