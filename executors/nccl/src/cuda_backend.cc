#include "cuda_backend.h"

#include <fmt/format.h>

#include "copy_kernel.h"
#include "device_copy.h"
#include "quantize_kernel.h"
#include "quantize_kernel_body.h"
#include "refit/core/quantization.h"
#include "refit/core/tensor_spec.h"
#include "refit/core/try.h"

namespace refit::nccl_detail {

static_assert(kMaxQuantizeDims == static_cast<int>(kMaxTensorDims), "a quantized box has any tensor's dims");

Result<std::unique_ptr<CudaBackend>> CudaBackend::make(const Program& program,
                                                       std::span<std::byte* const> shards, Communicator& comm,
                                                       OnFailure on_failure) {
  const DeviceGuard guard(comm.device());
  REFIT_TRY(guard.status());
  std::unique_ptr<CudaBackend> b(new CudaBackend(comm, on_failure));
  b->shards_.assign(shards.begin(), shards.end());
  for (std::size_t i = 0; i < program.staging_regions.size(); ++i)
    b->staging_starts_.push_back(program.staging_start(static_cast<std::int32_t>(i)));
  REFIT_TRY(b->allocate(program));
  REFIT_TRY(b->upload_copies(program));
  return b;
}

Result<void> CudaBackend::allocate(const Program& program) {
  REFIT_TRY(copy_.create());
  REFIT_TRY(comm_stream_.create());
  events_.resize(static_cast<std::size_t>(program.events));
  for (auto& e : events_) REFIT_TRY(e.create());
  REFIT_TRY(staging_.allocate(static_cast<std::size_t>(program.staging_bytes), "cudaMalloc (staging)"));
  return scratch_.allocate(static_cast<std::size_t>(program.scratch_bytes),
                           "cudaMalloc (scratch for relayed data)");
}

std::byte* CudaBackend::resolve(const Address& a) const {
  std::byte* base = nullptr;
  switch (a.kind) {
    case BufferKind::kShard:
      base = shards_[static_cast<std::size_t>(a.index)];
      break;
    case BufferKind::kStaging:
      base = staging_.get() + staging_starts_[static_cast<std::size_t>(a.index)];
      break;
    case BufferKind::kScratch:
      base = scratch_.get();
      break;
  }
  // Integer arithmetic: a box origin may lie before its buffer (only elements inside are touched).
  return reinterpret_cast<std::byte*>(reinterpret_cast<std::uintptr_t>(base) +
                                      static_cast<std::uintptr_t>(a.offset));
}

Result<void> CudaBackend::upload_copies(const Program& program) {
  std::vector<DeviceCopy> all;
  launches_.resize(static_cast<std::size_t>(program.batches));
  for (const auto& op : program.ops) {
    const auto* batch = std::get_if<CopyBatch>(&op);
    if (batch == nullptr) continue;
    const auto first = all.size();
    for (const auto& c : batch->copies)
      all.push_back(make_device_copy(c.geometry, resolve(c.src), resolve(c.dst)));
    const std::span<DeviceCopy> mine(all.data() + first, all.size() - first);
    launches_[static_cast<std::size_t>(batch->id)] = Launch{.first = static_cast<std::int64_t>(first),
                                                            .count = static_cast<std::int32_t>(mine.size()),
                                                            .items = number_items(mine)};
  }
  const auto bytes = all.size() * sizeof(DeviceCopy);
  REFIT_TRY(copies_.allocate(bytes, "cudaMalloc (copy descriptors)"));
  if (bytes == 0) return {};
  return upload(copies_.get(), all.data(), bytes, "cudaMemcpy (copy descriptors)");
}

Result<void> CudaBackend::issue_p2p(const P2p& p) const {
  const bool send = p.direction == Direction::kSend;
  const auto status = send ? ncclSend(resolve(p.at), static_cast<std::size_t>(p.bytes), ncclUint8,
                                      p.peer_comm, comm_.get(), comm_stream_.get())
                           : ncclRecv(resolve(p.at), static_cast<std::size_t>(p.bytes), ncclUint8,
                                      p.peer_comm, comm_.get(), comm_stream_.get());
  if (status == ncclInProgress) return {};  // a non-blocking communicator settles at ncclGroupEnd
  return nccl_ok(
      status,
      fmt::format("{}(rank {} {} rank {} on communicator rank {}, transfer {}, chunk {}, {} bytes)",
                  send ? "ncclSend" : "ncclRecv", p.self.value, send ? "to" : "from", p.peer.value,
                  p.peer_comm, p.transfer, p.chunk, p.bytes),
      comm_.get());
}

Result<void> CudaBackend::issue_batch(const CopyBatch& b) const {
  const auto& l = launches_[static_cast<std::size_t>(b.id)];
  const auto* copies = reinterpret_cast<const DeviceCopy*>(copies_.get()) + l.first;
  return cuda_ok(launch_copy_batch(copies, l.count, l.items, copy_.get()),
                 fmt::format("copy kernel ({} of {} boxes for step {})",
                             b.kind == BatchKind::kPack ? "packing" : "unpacking", l.count, b.step));
}

Result<void> CudaBackend::issue_quantize(const Quantize& q) const {
  return cuda_ok(
      launch_quantize(q.scheme, reinterpret_cast<const std::uint16_t*>(resolve(q.source)), q.shape.data(),
                      q.strides.data(), static_cast<int>(q.shape.size()),
                      reinterpret_cast<std::uint8_t*>(resolve(q.values)), resolve(q.scales), copy_.get()),
      fmt::format("quantize kernel ({} of a {}-dim box)", quant_scheme_name(q.scheme), q.shape.size()));
}

Result<void> CudaBackend::issue(const Op& op, Clock::time_point deadline) {
  if (std::holds_alternative<GroupStart>(op)) {
    REFIT_TRY(nccl_ok(ncclGroupStart(), "ncclGroupStart", comm_.get()));
    group_open_ = true;
    return {};
  }
  if (const auto* end = std::get_if<GroupEnd>(&op)) {
    group_open_ = false;
    return nccl_settle(comm_.get(), ncclGroupEnd(), fmt::format("ncclGroupEnd (step {})", end->step),
                       deadline);
  }
  if (const auto* p = std::get_if<P2p>(&op)) return issue_p2p(*p);
  if (const auto* b = std::get_if<CopyBatch>(&op)) return issue_batch(*b);
  if (const auto* q = std::get_if<Quantize>(&op)) return issue_quantize(*q);
  if (const auto* r = std::get_if<Record>(&op))
    return cuda_ok(cudaEventRecord(events_[static_cast<std::size_t>(r->event)].get(), stream(r->stream)),
                   "cudaEventRecord");
  const auto& w = std::get<Wait>(op);
  return cuda_ok(cudaStreamWaitEvent(stream(w.stream), events_[static_cast<std::size_t>(w.event)].get(), 0),
                 "cudaStreamWaitEvent");
}

// NCCL's group depth is the thread's: a group left open by a failed send or receive would swallow
// the next communicator's calls on this thread. Ending it after a failed call inside it cleans the
// group up without launching it, and reports that failure, which is already being returned.
void CudaBackend::abort() {
  if (group_open_) (void)ncclGroupEnd();
  group_open_ = false;
  comm_.give_up(on_failure_);
}

Result<bool> CudaBackend::reached(std::int32_t event) {
  ncclResult_t state = ncclSuccess;
  REFIT_TRY(nccl_ok(ncclCommGetAsyncError(comm_.get(), &state), "ncclCommGetAsyncError", comm_.get()));
  if (state != ncclSuccess && state != ncclInProgress)
    return nccl_error(state, "NCCL (asynchronous error)", comm_.get());
  const cudaError_t status = cudaEventQuery(events_[static_cast<std::size_t>(event)].get());
  if (status == cudaErrorNotReady) return false;
  REFIT_TRY(cuda_ok(status, "cudaEventQuery"));
  return true;
}

}  // namespace refit::nccl_detail
