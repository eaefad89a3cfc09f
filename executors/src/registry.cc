#include "refit/executors/registry.h"

#include <algorithm>

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

struct Entry {
  std::string_view name;
  Factory make;
};

// One line per backend; each is compiled in when CMake found its dependencies.
std::vector<Entry> entries() {
  std::vector<Entry> table;
#ifdef REFIT_HAVE_UCX
  table.push_back({"ucx", &make_ucx_executor});
#endif
#ifdef REFIT_HAVE_NCCL
  table.push_back({"nccl", &make_nccl_executor});
#endif
  return table;
}

}  // namespace

std::vector<std::string_view> executor_names() {
  std::vector<std::string_view> names;
  for (const auto& e : entries()) names.push_back(e.name);
  return names;
}

Result<std::unique_ptr<Executor>> make_executor(std::string_view name, Bootstrap& bootstrap,
                                                const ExecutorOptions& options) {
  const auto table = entries();
  const auto it = std::ranges::find(table, name, &Entry::name);
  if (it == table.end())
    return fail(ErrorCode::kNotFound,
                fmt::format("unknown executor '{}' (this build has: {})", name,
                            table.empty() ? std::string("none")
                                          : fmt::format("{}", fmt::join(executor_names(), ", "))));
  return it->make(bootstrap, options);
}

}  // namespace refit
