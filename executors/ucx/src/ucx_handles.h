#pragma once
// Owners of the libucp objects the executor uses, and UCX status codes as refit Errors.
#include <ucp/api/ucp.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "refit/core/error.h"

namespace refit::ucx_detail {

// A failed UCX call as an error (kRuntime), like fail(): "<what>: <UCX's status string>".
std::unexpected<Error> ucx_error(ucs_status_t status, std::string_view what);

// The process's context and worker. Thread mode single: only the thread that calls the executor
// drives it. Wakeup is enabled so that waiting sleeps on event_fd() instead of spinning.
class Worker {
 public:
  [[nodiscard]] static Result<std::unique_ptr<Worker>> create();
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  ucp_context_h context() const { return context_; }
  ucp_worker_h get() const { return worker_; }
  [[nodiscard]] Result<std::string> address() const;
  // Progresses until nothing is left to do; true when anything happened.
  bool progress_all();
  // Sleeps until the worker has an event or `timeout` passes; call it only after progress found
  // nothing to do. When UCX has work it cannot signal on the event fd (a send queued because the
  // peer's receive queue is full), it sleeps a short, growing interval instead of spinning.
  [[nodiscard]] Result<void> wait(std::chrono::milliseconds timeout);

 private:
  Worker(ucp_context_h context, ucp_worker_h worker, int event_fd)
      : context_(context), worker_(worker), event_fd_(event_fd) {}
  ucp_context_h context_;
  ucp_worker_h worker_;
  int event_fd_;
  std::chrono::microseconds backoff_{0};
};

// One registration with ucp_mem_map: of caller memory, or of memory UCX allocates for us.
class MemoryRegion {
 public:
  [[nodiscard]] static Result<MemoryRegion> map(ucp_context_h context, std::byte* base, std::int64_t bytes);
  [[nodiscard]] static Result<MemoryRegion> allocate(ucp_context_h context, std::int64_t bytes);
  MemoryRegion(MemoryRegion&& other) noexcept;
  MemoryRegion& operator=(MemoryRegion&&) = delete;
  ~MemoryRegion();

  std::byte* base() const { return base_; }
  std::int64_t bytes() const { return bytes_; }
  ucp_mem_h handle() const { return memh_; }
  // The remote key peers need to put into this region.
  [[nodiscard]] Result<std::string> packed_key() const;

 private:
  MemoryRegion(ucp_context_h context, ucp_mem_h memh, std::byte* base, std::int64_t bytes)
      : context_(context), memh_(memh), base_(base), bytes_(bytes) {}
  ucp_context_h context_;
  ucp_mem_h memh_;
  std::byte* base_;
  std::int64_t bytes_;
};

struct RkeyDeleter {
  void operator()(ucp_rkey_h key) const { ucp_rkey_destroy(key); }
};
using RemoteKey = std::unique_ptr<std::remove_pointer_t<ucp_rkey_h>, RkeyDeleter>;

// Closes endpoints: those to live peers flushing what they still carry, those to `dead` peers at
// once, dropping what is queued for them. Gives up after `grace`; destroying the worker then
// releases what is left.
void close_endpoints(Worker& worker, std::span<ucp_ep_h> endpoints, const std::vector<bool>& dead,
                     std::chrono::milliseconds grace);

}  // namespace refit::ucx_detail
