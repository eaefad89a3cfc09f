#pragma once
// Owning handles for the CUDA objects the executor allocates: released in their destructors,
// whose results are ignored (nothing can be done about a failed free at that point).
#include <cstddef>
#include <utility>

#include <cuda_runtime_api.h>

#include "cuda_status.h"

namespace refit::nccl_detail {

class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(DeviceMemory&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~DeviceMemory() { cudaFree(p_); }
  // No allocation for zero bytes: get() stays null.
  [[nodiscard]] Result<void> allocate(std::size_t bytes, std::string_view what) {
    if (bytes == 0) return {};
    return cuda_ok(cudaMalloc(&p_, bytes), what);
  }
  std::byte* get() const { return static_cast<std::byte*>(p_); }

 private:
  void* p_ = nullptr;
};

class Stream {
 public:
  Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (s_ != nullptr) cudaStreamDestroy(s_);
  }
  [[nodiscard]] Result<void> create() {
    return cuda_ok(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  }
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  Event() = default;
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  Event& operator=(Event&&) = delete;
  ~Event() {
    if (e_ != nullptr) cudaEventDestroy(e_);
  }
  // Without timing (cheaper to record and wait on) unless `flags` asks for it (cudaEventDefault).
  [[nodiscard]] Result<void> create(unsigned flags = cudaEventDisableTiming) {
    return cuda_ok(cudaEventCreateWithFlags(&e_, flags), "cudaEventCreateWithFlags");
  }
  cudaEvent_t get() const { return e_; }

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace refit::nccl_detail
