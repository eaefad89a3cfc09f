#include <fmt/format.h>

#include "refit/executors/executor.h"

namespace refit {

Result<void> check_options(const ExecutorOptions& options) {
  if (!(options.timeout.value > 0 && options.timeout.value <= kMaxTimeout.value))
    return out_of_range(fmt::format("timeout must be > 0 s and at most {} s (11.6 days), got {}",
                                    kMaxTimeout.value, options.timeout.value));
  if (options.staging.value <= 0)
    return out_of_range(fmt::format("staging must be > 0 bytes, got {}", options.staging.value));
  return {};
}

}  // namespace refit
