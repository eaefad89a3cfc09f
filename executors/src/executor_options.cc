#include <fmt/format.h>

#include "refit/executors/executor.h"
#include "refit/lowering/lowered_plan.h"

namespace refit {

Result<void> check_options(const ExecutorOptions& options) {
  if (!(options.timeout.value >= kMinTimeout.value && options.timeout.value <= kMaxTimeout.value))
    return out_of_range(fmt::format("timeout must be at least {:g} s and at most {:g} s (11.6 days), got {}",
                                    kMinTimeout.value, kMaxTimeout.value, options.timeout.value));
  if (options.staging < lowering::kMinStaging)
    return out_of_range(fmt::format("staging must be at least {} bytes (one chunk's), got {}",
                                    lowering::kMinStaging.value, options.staging.value));
  return {};
}

}  // namespace refit
