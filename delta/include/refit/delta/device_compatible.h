#pragma once
// REFIT_DELTA_HD marks the delta module's functions that nvcc also compiles for the GPU codec
// (executors/nccl): the checksum's terms (mix64.h, checksum.h) and the runs encoding's positions
// (run_positions.h). The headers that use it are C++20 and include no other refit header.
#if defined(__CUDACC__)
#define REFIT_DELTA_HD __host__ __device__
#else
#define REFIT_DELTA_HD
#endif
