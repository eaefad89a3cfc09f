#include "refit/executors/registry.h"

#include "refit/core/try.h"
#include "refit/executors/quantizing_executor.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#ifdef REFIT_HAVE_UCX
#include "refit/executors/ucx_executor.h"
#endif
#ifdef REFIT_HAVE_NCCL
#include "refit/executors/nccl/nccl_executor.h"
#endif

namespace refit {
namespace {

using Factory = Result<std::unique_ptr<Executor>> (*)(Bootstrap&, const ExecutorOptions&);

// Every backend refit has, whether or not this build has it.
constexpr std::array<std::string_view, 2> kBackends{"ucx", "nccl"};

struct Entry {
  std::string_view name;
  Factory make;
};

// One line per backend; each is compiled in when CMake found its dependencies.
std::vector<Entry> entries() {
  std::vector<Entry> table;
#ifdef REFIT_HAVE_UCX
  table.push_back({.name = "ucx", .make = &make_ucx_executor});
#endif
#ifdef REFIT_HAVE_NCCL
  table.push_back({.name = "nccl", .make = &make_nccl_executor});
#endif
  return table;
}

}  // namespace

std::vector<std::string_view> executor_names() {
  std::vector<std::string_view> names;
  for (const auto& e : entries()) names.push_back(e.name);
  return names;
}

Result<void> check_executor_name(std::string_view name) {
  const auto table = entries();
  if (std::ranges::find(table, name, &Entry::name) != table.end()) return {};
  auto message =
      fmt::format("unknown executor '{}' (this build has: {})", name,
                  table.empty() ? std::string("none") : fmt::format("{}", fmt::join(executor_names(), ", ")));
  // A backend this build was configured without (CMake did not find its dependencies).
  if (std::ranges::find(kBackends, name) != kBackends.end()) return unsupported(std::move(message));
  return not_found(std::move(message));
}

Result<std::unique_ptr<Executor>> make_executor(std::string_view name, Bootstrap& bootstrap,
                                                const ExecutorOptions& options) {
  REFIT_TRY(check_executor_name(name));
  const auto table = entries();
  const auto it = std::ranges::find(table, name, &Entry::name);
  REFIT_TRY(check_options(options));
  // Every backend sends weights quantised at the senders as fp8 (quantizing_executor.h).
  auto made = REFIT_TRY(it->make(bootstrap, options));
  return std::unique_ptr<Executor>(
      std::make_unique<QuantizingExecutor>(std::move(made), bootstrap, options.staging));
}

}  // namespace refit
