#include "ucx_log.h"

#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace refit::ucx_detail {
namespace {

// The sink UCX's handler forwards to. Never destroyed: UCX may log while the process exits.
struct Forwarding {
  std::mutex mutex;
  std::function<void(std::string_view)> sink;
};
Forwarding& forwarding() {
  static auto* state = new Forwarding;
  return *state;
}

// One line, with the host and process that UCX's own handler also names (the ranks of an mpirun
// job share one stderr).
std::string log_line(const char* file, unsigned line, ucs_log_level_t level, const char* format, va_list ap) {
  // UCX's lines are short; one that is not is kept whole rather than cut at a buffer's end.
  std::va_list again;
  va_copy(again, ap);
  const int length = std::vsnprintf(nullptr, 0, format, ap);
  std::string message(static_cast<std::size_t>(std::max(length, 0)), '\0');
  std::vsnprintf(message.data(), message.size() + 1, format, again);
  va_end(again);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  const char* slash = std::strrchr(file, '/');
  return fmt::format("[{}:{}] UCX {} {}:{} {}", host, getpid(), ucs_log_level_names[level],
                     slash != nullptr ? slash + 1 : file, line, message);
}

// The line to the sink; no other handler runs after it. Nothing may be thrown back into UCX's C
// code: a line that cannot be made or taken (no memory) goes to UCX's own handler instead.
ucs_log_func_rc_t forward(const char* file, unsigned line, const char* /*function*/, ucs_log_level_t level,
                          const ucs_log_component_config_t* /*component*/, const char* format, va_list ap) {
  std::va_list mine;  // `ap` stays whole for UCX's handler if this one gives up
  va_copy(mine, ap);
  auto rc = UCS_LOG_FUNC_RC_STOP;
  try {
    const auto text = log_line(file, line, level, format, mine);
    auto& state = forwarding();
    const std::lock_guard lock(state.mutex);
    state.sink(text);
  } catch (...) {
    rc = UCS_LOG_FUNC_RC_CONTINUE;
  }
  va_end(mine);
  return rc;
}

}  // namespace

void forward_log_to(std::function<void(std::string_view)> sink) {
  const char* chosen = ucs_global_opts.log_file;
  if (!sink || (chosen != nullptr && *chosen != '\0')) return;
  {
    auto& state = forwarding();
    const std::lock_guard lock(state.mutex);
    state.sink = std::move(sink);
  }
  static std::once_flag once;
  std::call_once(once, [] { ucs_log_push_handler(forward); });
}

}  // namespace refit::ucx_detail
