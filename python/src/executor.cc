// refit._refit.Executor: an executor of this build (make_executor: ucx, and nccl when built) over a
// Bootstrap whose allgather calls a Python callable, so that processes started by torchrun, Ray
// or mpi4py find each other through what they already have (torch.distributed, Ray, MPI).
// prepare() checks this rank's arrays, then every rank agrees before the executor's own collective
// prepare; execute() releases the GIL for the whole transfer and can run again every step.
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "buffers.h"
#include "refit/core/try.h"
#include "refit/executors/agreement.h"
#include "refit/executors/delta_executor.h"
#include "refit/executors/registry.h"
#include "refit/executors/sequenced_bootstrap.h"
#include "refit/lowering/lowered_plan.h"
#include "refit/refit.h"

namespace refit::python {
namespace {

using namespace nb::literals;

// The exception a Python call raised, in one line: "TypeName: message".
std::string describe(const nb::python_error& e) {
  return fmt::format("{}: {}", nb::type_name(e.type()).c_str(), nb::str(e.value()).c_str());
}

// allgather and barrier through `exchange(data: bytes) -> list[bytes]`, called with the GIL held
// (the executor calls in with it released). A barrier is an allgather of nothing. The callable's
// own timeout bounds each call: a peer that never calls leaves it waiting as long as the exchange
// lets it (torch.distributed: init_process_group's timeout).
class PythonBootstrap final : public Bootstrap {
 public:
  PythonBootstrap(nb::callable exchange, std::int32_t rank, std::int32_t size)
      : exchange_(std::move(exchange)), rank_(rank), size_(size) {}
  ~PythonBootstrap() override {
    nb::gil_scoped_acquire gil;
    exchange_.reset();
  }

  std::int32_t rank() const override { return rank_; }
  std::int32_t size() const override { return size_; }

  [[nodiscard]] Result<std::vector<std::string>> allgather(std::string_view mine) override {
    nb::gil_scoped_acquire gil;
    if (!exchange_.is_valid())
      return fail(ErrorCode::kRuntime, fmt::format("rank {}: the executor was collected", rank_));
    try {
      const nb::object all = exchange_(nb::bytes(mine.data(), mine.size()));
      std::vector<std::string> out;
      for (nb::handle item : all) {
        if (!nb::isinstance<nb::bytes>(item))
          return fail(ErrorCode::kRuntime,
                      fmt::format("rank {}: the exchange returned a {} where bytes were expected", rank_,
                                  nb::type_name(item.type()).c_str()));
        const auto b = nb::borrow<nb::bytes>(item);
        out.emplace_back(b.c_str(), b.size());
      }
      if (std::ssize(out) != size_)
        return fail(ErrorCode::kRuntime,
                    fmt::format("rank {}: the exchange returned {} contributions for {} ranks", rank_,
                                out.size(), size_));
      return out;
    } catch (const nb::python_error& e) {
      const auto code = e.matches(PyExc_TimeoutError) ? ErrorCode::kTimeout : ErrorCode::kPeerFailed;
      return fail(code, fmt::format("rank {}: the exchange failed: {}", rank_, describe(e)));
    }
  }

  [[nodiscard]] Result<void> barrier() override {
    REFIT_TRY(allgather({}));
    return {};
  }

  // For the garbage collector (executor_traverse, executor_clear).
  nb::handle exchange() const { return exchange_; }
  void release_exchange() { exchange_.reset(); }

 private:
  nb::object exchange_;
  std::int32_t rank_;
  std::int32_t size_;
};

// The bootstrap must outlive the executor: members go in reverse order.
struct ExecutorHandle {
  std::unique_ptr<PythonBootstrap> bootstrap;
  // Every collective call numbered: ranks out of step, or an exchange that garbles bytes, are named.
  std::unique_ptr<SequencedBootstrap> sequenced;
  std::unique_ptr<Executor> executor;
  DeltaExecutor* delta = nullptr;  // `executor`, when it makes every execute a delta step
  // The first failure of an execution: the transports and peers are then in no known state, so
  // the executor refuses to go on instead of waiting a timeout per call on peers that have left.
  std::optional<Error> failed;
  // Set by the signal check when a Python signal handler raised (Ctrl-C) during an execution.
  std::shared_ptr<std::atomic<bool>> interrupted = std::make_shared<std::atomic<bool>>(false);
  // The on_chunk_sent callable the executor's options call (None when not given).
  std::shared_ptr<nb::object> on_chunk_sent;
  // One execution at a time, of any plan prepared on it: the transport's worker is not shared
  // between threads (the GIL is released while it runs).
  std::atomic<bool> executing{false};
};

// The executor holds Python objects (the exchange, on_chunk_sent) that may hold the executor in
// turn (an exchange that is a bound method of the object keeping the executor): the garbage
// collector sees them through these, so such a cycle is collected instead of leaked.
int executor_traverse(PyObject* self, visitproc visit, void* arg) {
  if (!nb::inst_ready(self)) return 0;
  const auto* h = nb::inst_ptr<ExecutorHandle>(self);
  if (h->bootstrap) Py_VISIT(h->bootstrap->exchange().ptr());
  if (h->on_chunk_sent) Py_VISIT(h->on_chunk_sent->ptr());
  Py_VISIT(Py_TYPE(self));
  return 0;
}

int executor_clear(PyObject* self) {
  if (!nb::inst_ready(self)) return 0;
  auto* h = nb::inst_ptr<ExecutorHandle>(self);
  if (h->bootstrap) h->bootstrap->release_exchange();
  if (h->on_chunk_sent) *h->on_chunk_sent = nb::none();
  return 0;
}

PyType_Slot executor_slots[] = {{Py_tp_traverse, reinterpret_cast<void*>(executor_traverse)},
                                {Py_tp_clear, reinterpret_cast<void*>(executor_clear)},
                                {0, nullptr}};

// Ctrl-C while executing: the executing thread asks Python whether a signal came (its handler
// runs there when that is the main thread). The KeyboardInterrupt it raised is raised again by
// execute once the executor has stopped and told its peers.
std::function<bool()> signal_check(std::shared_ptr<std::atomic<bool>> seen) {
  return [seen = std::move(seen)] {
    nb::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() == 0) return false;
    PyErr_Clear();
    *seen = true;
    return true;
  };
}

// The prepared plan with the arrays whose memory it registered: the executor goes first.
struct PreparedHandle {
  std::vector<RankArrays> arrays;  // of each plan rank this process runs
  std::unique_ptr<PreparedPlan> prepared;
  ExecutorHandle* owner = nullptr;  // kept alive by the Python object (keep_alive)
  std::int32_t rank = 0;            // the first of them
  std::string plan_hash;
};

// The error of an executor that failed before, for a call after it.
Error failed_before(const Error& first, std::string_view call) {
  return Error{.code = ErrorCode::kRuntime,
               .message = fmt::format("cannot {}: this executor failed earlier ({}); make a new "
                                      "refit.Executor and prepare the plan again",
                                      call, first.message)};
}

// Called by the executor on its executing thread once a chunk this rank sent has been put; the
// callback runs with the GIL (progress display, fault injection in tests). An exception it raises
// is reported as unraisable and the transfer goes on.
std::shared_ptr<nb::object> shared_callable(nb::object callback) {
  if (callback.is_none()) return {};
  return std::shared_ptr<nb::object>(new nb::object(std::move(callback)), [](nb::object* o) {
    nb::gil_scoped_acquire gil;
    delete o;
  });
}

std::function<void(std::int32_t, std::int64_t)> chunk_callback(std::shared_ptr<nb::object> shared) {
  if (!shared) return {};
  return [shared](std::int32_t transfer, std::int64_t chunk) {
    nb::gil_scoped_acquire gil;
    if (shared->is_none()) return;  // released by the garbage collector
    try {
      (*shared)(transfer, chunk);
    } catch (nb::python_error& e) {
      e.discard_as_unraisable("refit executor on_chunk_sent");
    }
  };
}

// Where the executor puts this process's plan ranks: `device` -1 is the rank's on its host.
DevicePlacement placement_of(std::optional<std::vector<std::int32_t>> comm_rank_of, int device) {
  return {.device = device < 0 ? std::nullopt : std::optional<int>(device),
          .comm_rank_of = std::move(comm_rank_of)};
}

ExecutorHandle* make(const std::string& name, nb::callable exchange, std::int32_t rank, std::int32_t size,
                     double timeout, std::int64_t staging, bool direct_stores, nb::object on_chunk_sent,
                     std::optional<std::vector<std::int32_t>> comm_rank_of, int device, bool delta) {
  if (size <= 0 || rank < 0 || rank >= size)
    raise_error(Error{.code = ErrorCode::kOutOfRange,
                      .message = fmt::format("rank {} is not one of the exchange's {} ranks", rank, size)});
  auto handle = std::make_unique<ExecutorHandle>();
  handle->bootstrap = std::make_unique<PythonBootstrap>(std::move(exchange), rank, size);
  handle->on_chunk_sent = shared_callable(std::move(on_chunk_sent));
  const ExecutorOptions options{.timeout = Seconds{timeout},
                                .staging = Bytes{staging},
                                .direct_stores = direct_stores,
                                .on_chunk_sent = chunk_callback(handle->on_chunk_sent),
                                .interrupted = signal_check(handle->interrupted)};
  handle->sequenced = std::make_unique<SequencedBootstrap>(*handle->bootstrap);
  const auto placement = placement_of(std::move(comm_rank_of), device);
  if (delta) {
    auto made = make_delta_executor(name, *handle->sequenced, options, std::nullopt, placement);
    if (!made) raise_error(std::move(made.error()).in("--executor"));
    handle->delta = made->get();
    handle->executor = std::move(*made);
  } else {
    auto made = make_executor(name, *handle->sequenced, options, placement);
    if (!made) raise_error(std::move(made.error()).in("--executor"));
    handle->executor = std::move(*made);
  }
  return handle.release();
}

// Delta refit: the plans prepared from now on re-balance by the bytes that move (the facade's
// delta_rebalance, as refit run --delta-rebalance), re-planning `problem` on `cluster` with
// `strategy`; with no max_drift they never re-plan.
void rebalance_with(ExecutorHandle& self, const ProblemHandle& problem, const ClusterHandle& cluster,
                    const std::string& strategy, std::int64_t chunk_bytes, std::optional<double> max_drift) {
  if (self.delta == nullptr)
    raise_error(Error{.code = ErrorCode::kInvalidArgument,
                      .message = "delta_rebalance: the executor was made without delta=True"});
  if (max_drift && !(*max_drift >= 0.0 && *max_drift <= 1.0))
    raise_error(
        Error{.code = ErrorCode::kOutOfRange,
              .message = fmt::format("delta_rebalance: {} is not a share drift in [0, 1]", *max_drift)});
  if (!max_drift) {
    self.delta->rebalance_with(std::nullopt);
    return;
  }
  self.delta->rebalance_with(delta_rebalance(*problem.problem, *cluster.placed, strategy,
                                             PlanOptions{.chunk = Bytes{chunk_bytes}}, *max_drift));
}

// The rank's arrays keyed by parameter name: the rank's side's storage map, then the arrays.
Result<RankArrays> framework_arrays(const ProblemHandle& problem, Rank rank, const nb::dict& arrays) {
  const auto side = REFIT_TRY(side_storage(problem, problem.problem->is_source(rank)));
  return parameter_arrays(*problem.problem, *side.map, rank, arrays);
}

// Every rank learns whether every process's arrays are right (`mine`) before the executor's
// collective prepare (`prepare(arrays)`), so that a refusal anywhere (a storage map that cannot
// be made included, or what the Python side found wrong) is a refusal everywhere.
template <class Prepare>
PreparedHandle* prepare_agreed(ExecutorHandle& self, const PlanHandle& plan, std::int32_t first_rank,
                               Result<std::vector<RankArrays>> mine, Prepare prepare) {
  auto handle = std::make_unique<PreparedHandle>();
  handle->owner = &self;
  handle->rank = first_rank;
  handle->plan_hash = plan_hash_hex(*plan.plan);
  Result<std::unique_ptr<PreparedPlan>> prepared;
  {
    nb::gil_scoped_release release;
    const Result<std::string> checked = mine ? Result<std::string>("") : std::unexpected(mine.error());
    const auto agreed = agree(*self.sequenced, checked);
    if (!agreed)
      prepared = std::unexpected(agreed.error());
    else
      prepared = prepare(*mine);
  }
  handle->prepared = unwrap(std::move(prepared));
  handle->arrays = std::move(*mine);
  return handle.release();
}

// What checking a rank's arrays raised (a Python exception from an array's attributes, a cast
// that failed) as the rank's refusal: raised on this rank alone, it would leave every other rank
// waiting in the agreement.
template <class Check>
Result<std::vector<RankArrays>> refusing_exceptions(std::int32_t rank, Check check) {
  try {
    return check();
  } catch (const nb::python_error& e) {
    return invalid(fmt::format("rank {}: checking its buffers raised {}", rank, describe(e)));
  } catch (const std::exception& e) {
    return invalid(fmt::format("rank {}: checking its buffers failed: {}", rank, e.what()));
  }
}

// The arrays of `rank`, checked against its boxes or its side's parameters and against the memory
// `executor` moves (a rank's buffers are all of one kind: CUDA memory on an executor of host memory
// is refused naming one of them, where the executor's own refusal names none).
Result<RankArrays> arrays_of(const Executor& executor, const ProblemHandle& problem, Rank rank,
                             const nb::dict& arrays, bool framework) {
  auto out = REFIT_TRY(framework ? framework_arrays(problem, rank, arrays)
                                 : rank_arrays(*problem.problem, rank, arrays));
  if (out.buffers.memory == MemoryKind::kCuda && !executor.capabilities().cuda_memory)
    return unsupported(
        fmt::format("{}: CUDA memory, as is every buffer of the rank, but the {} executor "
                    "moves host memory: pass host tensors (.cpu()) or use the nccl executor",
                    out.named, executor.name()));
  return out;
}

PreparedHandle* prepare(ExecutorHandle& self, const PlanHandle& plan, const ProblemHandle& problem,
                        std::int32_t rank, const nb::dict& arrays, bool framework,
                        const std::string& refusal) {
  auto mine = refusing_exceptions(rank, [&]() -> Result<std::vector<RankArrays>> {
    if (self.failed) return std::unexpected(failed_before(*self.failed, "prepare"));
    if (!refusal.empty()) return invalid(fmt::format("rank {}: {}", rank, refusal));
    std::vector<RankArrays> one;
    one.push_back(REFIT_TRY(arrays_of(*self.executor, problem, Rank{rank}, arrays, framework)));
    return one;
  });
  return prepare_agreed(self, plan, rank, std::move(mine), [&](const std::vector<RankArrays>& a) {
    return self.executor->prepare(*plan.plan, Rank{rank}, a.front().buffers);
  });
}

// The several plan ranks of this process, at once.
Result<std::unique_ptr<PreparedPlan>> prepare_several(Executor& executor, const Plan& plan,
                                                      const std::vector<std::int32_t>& ranks,
                                                      const std::vector<RankArrays>& arrays) {
  std::vector<LocalRankBuffers> local;
  for (std::size_t i = 0; i < ranks.size(); ++i)
    local.push_back({.rank = Rank{ranks[i]}, .buffers = arrays[i].buffers});
  return executor.prepare_ranks(plan, local);
}

PreparedHandle* prepare_ranks(ExecutorHandle& self, const PlanHandle& plan, const ProblemHandle& problem,
                              const std::vector<std::int32_t>& ranks, const std::vector<nb::dict>& buffers,
                              bool framework, const std::string& refusal) {
  auto mine =
      refusing_exceptions(ranks.empty() ? 0 : ranks.front(), [&]() -> Result<std::vector<RankArrays>> {
        if (self.failed) return std::unexpected(failed_before(*self.failed, "prepare"));
        if (!refusal.empty()) return invalid(refusal);
        if (ranks.empty() || ranks.size() != buffers.size())
          return invalid(
              fmt::format("prepare_ranks: {} ranks and {} sets of buffers; one set per rank, at least one",
                          ranks.size(), buffers.size()));
        std::vector<RankArrays> all;
        for (std::size_t i = 0; i < ranks.size(); ++i)
          all.push_back(REFIT_TRY(arrays_of(*self.executor, problem, Rank{ranks[i]}, buffers[i], framework)));
        return all;
      });
  return prepare_agreed(self, plan, ranks.empty() ? 0 : ranks.front(), std::move(mine),
                        [&](const std::vector<RankArrays>& a) {
                          return prepare_several(*self.executor, *plan.plan, ranks, a);
                        });
}

nb::dict execute(PreparedHandle& self) {
  const auto where = fmt::format("rank {}", self.rank);
  if (self.owner->failed) raise_error(failed_before(*self.owner->failed, "execute").in(where));
  if (self.owner->executing.exchange(true))
    raise_error(Error{.code = ErrorCode::kRuntime,
                      .message = fmt::format("{}: this executor is already executing a plan on another "
                                             "thread; it executes one at a time",
                                             where)});
  Result<ExecutionReport> report;
  {
    nb::gil_scoped_release release;
    report = self.owner->executor->execute(*self.prepared);
  }
  self.owner->executing = false;
  if (!report) {
    self.owner->failed = report.error();
    if (self.owner->interrupted->exchange(false)) {
      PyErr_SetNone(PyExc_KeyboardInterrupt);
      throw nb::python_error();
    }
    raise_error(std::move(report.error()).in(where));
  }
  const auto& r = *report;
  nb::dict d;
  d["rank"] = self.rank;
  d["bytes_sent"] = r.bytes_sent.value;
  d["bytes_received"] = r.bytes_received.value;
  d["elapsed_s"] = r.elapsed.value;
  d["messages"] = r.messages;
  d["bytes_stored_directly"] = r.stored_directly.value;
  if (r.delta) {
    nb::dict delta;
    delta["dense_bytes"] = r.delta->dense_bytes.value;
    delta["pieces"] = r.delta->pieces;
    delta["unchanged"] = r.delta->unchanged;
    delta["full"] = r.delta->full;
    delta["encode_s"] = r.delta->encode.value;
    delta["decode_s"] = r.delta->decode.value;
    delta["exchange_s"] = r.delta->exchange.value;
    delta["share_drift"] = r.delta->share_drift ? nb::cast(*r.delta->share_drift) : nb::none();
    delta["rebalanced"] = r.delta->rebalanced;
    delta["rebalance_s"] = r.delta->rebalance.value;
    d["delta"] = delta;
  }
  if (r.engines) {
    d["engines_completed"] = r.engines->completed;
    d["engines_missed"] = r.engines->missed;
  }
  return d;
}

// A barrier through the executor's numbered exchange, the GIL released meanwhile: the Python side
// compares the memory the prepares of this process claim once every rank of a prepare has entered
// it (so a rank's plan of the step before, dropped before it prepares again, is gone by then).
void barrier(ExecutorHandle& self) {
  Result<std::vector<std::string>> done;
  {
    nb::gil_scoped_release release;
    done = self.sequenced->allgather({});  // an allgather of nothing, as PythonBootstrap's barrier
  }
  if (!done) raise_error(done.error());
}

// Elastic refit: the problem's engines (facade's engine_membership), `members` of them taking part.
void set_members(ExecutorHandle& self, const ProblemHandle& problem, const std::vector<std::int32_t>& members,
                 std::uint64_t epoch) {
  auto m = unwrap(engine_membership(problem.source, *problem.problem, epoch));
  m.members.assign(m.members.size(), false);
  for (const auto e : members) {
    if (e < 0 || std::cmp_greater_equal(e, m.members.size()))
      raise_error(Error{.code = ErrorCode::kOutOfRange,
                        .message = fmt::format("members: engine {} is not one of the problem's {} engines", e,
                                               m.members.size())});
    m.members[static_cast<std::size_t>(e)] = true;
  }
  unwrap(self.executor->set_membership(m));
}

// Host memory the executor moves fastest (UCX: memory its peers map and write into directly), as
// a one-dimensional uint8 numpy array that keeps the allocation alive.
nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>> allocate(ExecutorHandle& self, std::int64_t nbytes) {
  auto memory = unwrap(self.executor->allocate_host(Bytes{nbytes}));
  const auto bytes = memory->bytes();
  auto* data = reinterpret_cast<std::uint8_t*>(bytes.data());
  nb::capsule owner(memory.release(), [](void* p) noexcept { delete static_cast<HostAllocation*>(p); });
  return nb::ndarray<nb::numpy, std::uint8_t, nb::ndim<1>>(data, {static_cast<std::size_t>(nbytes)}, owner);
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto n : executor_names()) out.emplace_back(n);
  return out;
}

}  // namespace

void bind_executor(nb::module_& m) {
  m.attr("MAX_TIMEOUT_S") = kMaxTimeout.value;
  m.attr("MIN_TIMEOUT_S") = kMinTimeout.value;
  m.attr("DEFAULT_STAGING_BYTES") = lowering::kDefaultStaging.value;
  m.attr("MIN_STAGING_BYTES") = lowering::kMinStaging.value;
  m.attr("FIRST_PAGE_BYTES") = kFirstPage;
  m.attr("DELTA_REBALANCE") = DeltaRebalance{}.max_drift;
  nb::class_<ExecutorHandle>(m, "Executor",
                             "An executor of this build (refit._refit.executor_names()) bound to a Python "
                             "exchange; one per process.",
                             nb::type_slots(executor_slots))
      .def(nb::new_(&make), "name"_a, "exchange"_a, "rank"_a, "size"_a, "timeout"_a, "staging"_a,
           "direct_stores"_a, "on_chunk_sent"_a = nb::none(), "comm_rank_of"_a = nb::none(), "device"_a = -1,
           "delta"_a = false,
           "exchange(data: bytes) -> list[bytes] is an allgather over the job's processes (every "
           "process's data, by rank); rank and size are this process's place in it. timeout (seconds) "
           "bounds every wait on a peer; staging (bytes) must be the same on every rank. nccl only: "
           "comm_rank_of[plan rank] is the exchange rank whose process runs it (several plan ranks "
           "per process, prepare_ranks), device the CUDA device (-1: the rank's on its host). delta: "
           "every execute is a step of a delta refit (DeltaExecutor: host memory, refit and direct plans).")
      .def_prop_ro(
          "name", [](const ExecutorHandle& e) { return std::string(e.executor->name()); },
          "The backend: ucx or nccl.")
      .def_prop_ro(
          "cuda_memory", [](const ExecutorHandle& e) { return e.executor->capabilities().cuda_memory; },
          "Whether it moves CUDA memory (torch CUDA tensors).")
      .def("prepare", &prepare, "plan"_a, "problem"_a, "rank"_a, "buffers"_a, "framework"_a = false,
           "refusal"_a = "", nb::keep_alive<0, 1>(),
           "Collective: checks this rank's buffers on every rank, then registers them and connects to "
           "the peers. Nothing moves yet. buffers maps tensor name -> array, each checked against the "
           "rank's box (shape, dtype, contiguity, size); with framework, parameter name -> array for "
           "every parameter of the rank's side's storage map (Problem.storage), each checked against "
           "the parameter, the shards moved as regions of them.")
      .def("prepare_ranks", &prepare_ranks, "plan"_a, "problem"_a, "ranks"_a, "buffers"_a,
           "framework"_a = false, "refusal"_a = "", nb::keep_alive<0, 1>(),
           "Collective, as prepare, for several plan ranks of this process (nccl with comm_rank_of): "
           "buffers[i] are the buffers of ranks[i].")
      .def("barrier", &barrier,
           "Collective: returns once every rank has called it (through the exchange, numbered as "
           "every collective call).")
      .def("rebalance_with", &rebalance_with, "problem"_a, "cluster"_a, "strategy"_a, "chunk_bytes"_a,
           "max_drift"_a.none(),
           "Delta refit: the plans prepared from now on re-plan the problem on the cluster with the "
           "strategy by a step's payloads once their shares drift past max_drift (None: never).")
      .def("set_members", &set_members, "problem"_a, "members"_a, "epoch"_a,
           "Elastic refit: the executions that follow run over these engines of the problem (indices); "
           "a rank that dies makes its engine miss the step, not the others fail; epoch names the "
           "membership, and a peer of an older one is fenced out.")
      .def("allocate", &allocate, "nbytes"_a,
           "Host memory this executor moves fastest, uninitialised, as a uint8 numpy array.");
  nb::class_<PreparedHandle>(m, "Prepared", "A plan prepared on an executor with this rank's buffers.")
      .def("execute", &execute,
           "Moves the bytes (the GIL is released meanwhile); call again every step. Returns this "
           "rank's report.")
      .def_prop_ro(
          "rank", [](const PreparedHandle& p) { return p.rank; }, "This process's rank.")
      .def_prop_ro(
          "plan_hash", [](const PreparedHandle& p) { return p.plan_hash; }, "The prepared plan's hash.");
  m.def("executor_names", &names, "The executors this build has, e.g. ['ucx'].");
}

}  // namespace refit::python
