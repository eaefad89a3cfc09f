#include "ucx_log.h"

#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

namespace refit::ucx_detail {
namespace {

// One line on stderr, with the host and process that UCX's own handler also names (the ranks of
// an mpirun job share one stderr); no other handler runs after it.
ucs_log_func_rc_t to_stderr(const char* file, unsigned line, const char* /*function*/, ucs_log_level_t level,
                            const ucs_log_component_config_t* /*component*/, const char* format, va_list ap) {
  char message[1024];
  std::vsnprintf(message, sizeof message, format, ap);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  const char* slash = std::strrchr(file, '/');
  std::fprintf(stderr, "[%s:%d] UCX %s %s:%u %s\n", host, static_cast<int>(getpid()),
               ucs_log_level_names[level], slash != nullptr ? slash + 1 : file, line, message);
  return UCS_LOG_FUNC_RC_STOP;
}

}  // namespace

void log_to_stderr() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* chosen = ucs_global_opts.log_file;
    if (chosen == nullptr || *chosen == '\0') ucs_log_push_handler(to_stderr);
  });
}

}  // namespace refit::ucx_detail
