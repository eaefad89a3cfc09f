#include "ucx_handles.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace refit::ucx_detail {
namespace {

constexpr std::chrono::microseconds kShortestBackoff{10};
constexpr std::chrono::microseconds kLongestBackoff{1000};

}  // namespace

std::unexpected<Error> ucx_error(ucs_status_t status, std::string_view what) {
  return fail(ErrorCode::kRuntime, fmt::format("{}: {}", what, ucs_status_string(status)));
}

Result<std::unique_ptr<Worker>> Worker::create() {
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  ucp_context_h context = nullptr;
  if (auto s = ucp_init(&params, nullptr, &context); s != UCS_OK) return ucx_error(s, "ucp_init");
  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h worker = nullptr;
  if (auto s = ucp_worker_create(context, &worker_params, &worker); s != UCS_OK) {
    ucp_cleanup(context);
    return ucx_error(s, "ucp_worker_create");
  }
  int fd = -1;
  if (auto s = ucp_worker_get_efd(worker, &fd); s != UCS_OK) {
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
    return ucx_error(s, "ucp_worker_get_efd");
  }
  return std::unique_ptr<Worker>(new Worker(context, worker, fd));
}

Worker::~Worker() {
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
}

Result<std::string> Worker::address() const {
  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  if (auto s = ucp_worker_get_address(worker_, &address, &length); s != UCS_OK)
    return ucx_error(s, "ucp_worker_get_address");
  std::string out(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(worker_, address);
  return out;
}

bool Worker::progress_all() {
  bool any = false;
  while (ucp_worker_progress(worker_) != 0) any = true;
  if (any) backoff_ = std::chrono::microseconds{0};
  return any;
}

Result<void> Worker::wait(std::chrono::milliseconds timeout) {
  // Arm-then-poll: arming fails with BUSY when events arrived since the last progress, so no
  // wakeup is lost between the caller's progress and the poll.
  const ucs_status_t armed = ucp_worker_arm(worker_);
  if (armed == UCS_ERR_BUSY) {
    backoff_ = std::clamp(backoff_ * 2, kShortestBackoff, kLongestBackoff);
    std::this_thread::sleep_for(std::min<std::chrono::microseconds>(backoff_, timeout));
    return {};
  }
  backoff_ = std::chrono::microseconds{0};
  if (armed != UCS_OK) return ucx_error(armed, "ucp_worker_arm");
  pollfd fd{.fd = event_fd_, .events = POLLIN, .revents = 0};
  const int ready = ::poll(&fd, 1, static_cast<int>(timeout.count()));
  if (ready < 0 && errno != EINTR)
    return fail(ErrorCode::kRuntime, fmt::format("poll on the UCX event fd: {}", std::strerror(errno)));
  return {};
}

Result<MemoryRegion> MemoryRegion::map(ucp_context_h context, std::byte* base, std::int64_t bytes) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = base;
  params.length = static_cast<std::size_t>(bytes);
  ucp_mem_h memh = nullptr;
  if (auto s = ucp_mem_map(context, &params, &memh); s != UCS_OK)
    return ucx_error(s, fmt::format("ucp_mem_map of {} bytes", bytes));
  return MemoryRegion(context, memh, base, bytes);
}

Result<MemoryRegion> MemoryRegion::allocate(ucp_context_h context, std::int64_t bytes) {
  ucp_mem_map_params_t params{};
  params.field_mask =
      UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
  params.address = nullptr;
  params.length = static_cast<std::size_t>(bytes);
  params.flags = UCP_MEM_MAP_ALLOCATE;
  ucp_mem_h memh = nullptr;
  if (auto s = ucp_mem_map(context, &params, &memh); s != UCS_OK)
    return ucx_error(s, fmt::format("allocating {} bytes with ucp_mem_map", bytes));
  ucp_mem_attr_t attr{};
  attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS;
  if (auto s = ucp_mem_query(memh, &attr); s != UCS_OK) {
    ucp_mem_unmap(context, memh);
    return ucx_error(s, "ucp_mem_query");
  }
  return MemoryRegion(context, memh, static_cast<std::byte*>(attr.address), bytes);
}

MemoryRegion::MemoryRegion(MemoryRegion&& other) noexcept
    : context_(other.context_),
      memh_(std::exchange(other.memh_, nullptr)),
      base_(other.base_),
      bytes_(other.bytes_) {}

MemoryRegion::~MemoryRegion() {
  if (memh_ != nullptr) ucp_mem_unmap(context_, memh_);
}

Result<std::string> MemoryRegion::packed_key() const {
  void* buffer = nullptr;
  std::size_t length = 0;
  if (auto s = ucp_rkey_pack(context_, memh_, &buffer, &length); s != UCS_OK)
    return ucx_error(s, "ucp_rkey_pack");
  std::string out(static_cast<const char*>(buffer), length);
  ucp_rkey_buffer_release(buffer);
  return out;
}

void close_endpoints(Worker& worker, std::span<ucp_ep_h> endpoints, const std::vector<bool>& dead,
                     std::chrono::milliseconds grace) {
  std::vector<void*> pending;
  for (std::size_t i = 0; i < endpoints.size(); ++i) {
    if (endpoints[i] == nullptr) continue;
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    params.flags = dead[i] ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void* request = ucp_ep_close_nbx(std::exchange(endpoints[i], nullptr), &params);
    if (UCS_PTR_IS_PTR(request)) pending.push_back(request);
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (!pending.empty() && std::chrono::steady_clock::now() < deadline) {
    if (!worker.progress_all()) (void)worker.wait(std::chrono::milliseconds(10));
    std::erase_if(pending, [](void* r) {
      if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
      ucp_request_free(r);
      return true;
    });
  }
  for (void* r : pending) ucp_request_free(r);
}

}  // namespace refit::ucx_detail
