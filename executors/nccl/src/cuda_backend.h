#pragma once
// The Backend that issues a Program to CUDA and NCCL: two streams, one event per program event,
// staging and scratch memory, and every copy batch's descriptors uploaded once at prepare time,
// so that issuing a batch is one kernel launch.
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "communicator.h"
#include "cuda_handles.h"
#include "program.h"
#include "run_program.h"

namespace refit::nccl_detail {

class CudaBackend final : public Backend {
 public:
  // `shards` are the program's shard buffers (device memory on the communicator's GPU); the
  // communicator must outlive the backend.
  [[nodiscard]] static Result<std::unique_ptr<CudaBackend>> make(const Program& program,
                                                                 std::span<std::byte* const> shards,
                                                                 Communicator& comm,
                                                                 OnFailure on_failure = OnFailure::kAbort);

  [[nodiscard]] Result<void> issue(const Op& op, Clock::time_point deadline) override;
  [[nodiscard]] Result<bool> reached(std::int32_t event) override;
  void abort() override;

 private:
  struct Launch {
    std::int64_t first = 0;  // index of the batch's first descriptor
    std::int32_t count = 0;
    std::int64_t items = 0;
  };

  CudaBackend(Communicator& comm, OnFailure on_failure) : comm_(comm), on_failure_(on_failure) {}
  [[nodiscard]] Result<void> allocate(const Program& program);
  [[nodiscard]] Result<void> upload_copies(const Program& program);
  std::byte* resolve(const Address& a) const;
  cudaStream_t stream(StreamKind k) const {
    return k == StreamKind::kCopy ? copy_.get() : comm_stream_.get();
  }
  [[nodiscard]] Result<void> issue_p2p(const P2p& p) const;
  [[nodiscard]] Result<void> issue_batch(const CopyBatch& b) const;
  [[nodiscard]] Result<void> issue_quantize(const Quantize& q) const;

  Communicator& comm_;
  OnFailure on_failure_;
  std::vector<std::byte*> shards_;
  std::vector<std::int64_t> staging_starts_;  // by staging region
  Stream copy_;
  Stream comm_stream_;
  std::vector<Event> events_;
  DeviceMemory staging_;
  DeviceMemory scratch_;
  DeviceMemory copies_;           // every batch's DeviceCopy descriptors, back to back
  std::vector<Launch> launches_;  // by batch id
  bool group_open_ = false;       // between a GroupStart issued and its GroupEnd
};

}  // namespace refit::nccl_detail
