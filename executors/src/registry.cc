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
#include "refit/executors/nccl/kernel_timing.h"
#include "refit/executors/nccl/nccl_delta_executor.h"
#include "refit/executors/nccl/nccl_executor.h"
#endif

namespace refit {
namespace {

using Factory = Result<std::unique_ptr<Executor>> (*)(Bootstrap&, const ExecutorOptions&,
                                                      const DevicePlacement&);
using DeltaFactory = Result<std::unique_ptr<DeltaExecutor>> (*)(Bootstrap&, const ExecutorOptions&,
                                                                std::optional<DeltaRebalance>,
                                                                const DevicePlacement&);

// A backend that takes no placement (Entry::takes_placement is false; make_executor checks).
template <Result<std::unique_ptr<Executor>> (*make)(Bootstrap&, const ExecutorOptions&)>
Result<std::unique_ptr<Executor>> unplaced(Bootstrap& bootstrap, const ExecutorOptions& options,
                                           const DevicePlacement&) {
  return make(bootstrap, options);
}

// A delta refit whose bytes lie in host memory, encoded by the CPU codec, over the backend `make`
// makes.
template <Factory make>
Result<std::unique_ptr<DeltaExecutor>> host_memory_delta(Bootstrap& bootstrap, const ExecutorOptions& options,
                                                         std::optional<DeltaRebalance> rebalance,
                                                         const DevicePlacement& placement) {
  auto made = REFIT_TRY(make(bootstrap, options, placement));
  return std::make_unique<DeltaExecutor>(std::move(made), bootstrap, DeltaEncodeOptions{},
                                         std::move(rebalance));
}

// Every backend refit has, whether or not this build has it.
constexpr std::array<std::string_view, 2> kBackends{"ucx", "nccl"};

// Times the backend's own GPU kernels (kernel_speeds.h); null for a backend without any.
using KernelTimingFunction = Result<KernelSpeeds> (*)(std::string_view, const KernelTiming&);

struct Entry {
  std::string_view name;
  Factory make;
  DeltaFactory make_delta;
  KernelTimingFunction time_kernels = nullptr;
  bool takes_placement = false;  // a device or several plan ranks in one process (DevicePlacement)
};

#ifdef REFIT_HAVE_NCCL
NcclSetup nccl_setup(const DevicePlacement& placement) {
  return {.device = placement.device.value_or(kDeviceOfHostRank),
          .comm_rank_of = placement.comm_rank_of.value_or(CommRankMap{})};
}

Result<std::unique_ptr<Executor>> nccl(Bootstrap& bootstrap, const ExecutorOptions& options,
                                       const DevicePlacement& placement) {
  auto made = REFIT_TRY(NcclExecutor::create(bootstrap, options, nccl_setup(placement)));
  return std::unique_ptr<Executor>(std::move(made));
}

Result<std::unique_ptr<DeltaExecutor>> nccl_delta(Bootstrap& bootstrap, const ExecutorOptions& options,
                                                  std::optional<DeltaRebalance> rebalance,
                                                  const DevicePlacement& placement) {
  return make_nccl_delta_executor(bootstrap, options, nccl_setup(placement), std::move(rebalance));
}
#endif

// One line per backend; each is compiled in when CMake found its dependencies.
std::vector<Entry> entries() {
  std::vector<Entry> table;
#ifdef REFIT_HAVE_UCX
  table.push_back({.name = "ucx",
                   .make = &unplaced<&make_ucx_executor>,
                   .make_delta = &host_memory_delta<&unplaced<&make_ucx_executor>>,
                   .time_kernels = nullptr,
                   .takes_placement = false});
#endif
#ifdef REFIT_HAVE_NCCL
  table.push_back({.name = "nccl",
                   .make = &nccl,
                   .make_delta = &nccl_delta,
                   .time_kernels = &time_nccl_kernels,
                   .takes_placement = true});
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

namespace {

[[nodiscard]] Result<void> check_placement(const Entry& entry, const DevicePlacement& placement) {
  if (placement.is_default() || entry.takes_placement) return {};
  std::vector<std::string_view> placing;
  for (const auto& e : entries())
    if (e.takes_placement) placing.push_back(e.name);
  return invalid(fmt::format(
      "device, comm_rank_of: the {} executor runs one plan rank per process, on its host's ranks; only {} "
      "take them",
      entry.name,
      placing.empty() ? std::string("executors this build lacks")
                      : fmt::format("{}", fmt::join(placing, ", "))));
}

[[nodiscard]] Result<Entry> entry_of(std::string_view name, const ExecutorOptions& options,
                                     const DevicePlacement& placement) {
  REFIT_TRY(check_executor_name(name));
  REFIT_TRY(check_options(options));
  const auto table = entries();
  const auto entry = *std::ranges::find(table, name, &Entry::name);
  REFIT_TRY(check_placement(entry, placement));
  return entry;
}

}  // namespace

Result<std::unique_ptr<DeltaExecutor>> make_delta_executor(std::string_view name, Bootstrap& bootstrap,
                                                           const ExecutorOptions& options,
                                                           std::optional<DeltaRebalance> rebalance,
                                                           const DevicePlacement& placement) {
  if (placement.comm_rank_of) return invalid("comm_rank_of: a delta refit runs one plan rank per process");
  const auto entry = REFIT_TRY(entry_of(name, options, placement));
  return entry.make_delta(bootstrap, options, std::move(rebalance), placement);
}

Result<std::unique_ptr<Executor>> make_executor(std::string_view name, Bootstrap& bootstrap,
                                                const ExecutorOptions& options,
                                                const DevicePlacement& placement) {
  const auto entry = REFIT_TRY(entry_of(name, options, placement));
  // Every backend sends weights quantized at the senders as fp8 (quantizing_executor.h).
  auto made = REFIT_TRY(entry.make(bootstrap, options, placement));
  return std::unique_ptr<Executor>(
      std::make_unique<QuantizingExecutor>(std::move(made), bootstrap, options.staging));
}

Result<KernelSpeeds> time_gpu_kernels(std::string_view pci_bus_id, const KernelTiming& timing) {
  for (const auto& e : entries())
    if (e.time_kernels != nullptr) return e.time_kernels(pci_bus_id, timing);
  return unsupported(
      "this build has no GPU kernels to time: the NCCL executor, which has them, was not built (CUDA "
      "and NCCL not found)");
}

}  // namespace refit
