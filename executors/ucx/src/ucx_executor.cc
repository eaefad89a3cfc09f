#include "refit/executors/ucx_executor.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "connections.h"
#include "engine.h"
#include "handshake.h"
#include "refit/core/try.h"
#include "refit/executors/agreement.h"
#include "refit/executors/host_memory.h"
#include "refit/executors/rank_buffers.h"
#include "refit/executors/repair_plan.h"
#include "repair_program.h"
#include "ucx_handles.h"
#include "ucx_log.h"
#include "ucx_program.h"
#include "wire.h"

namespace refit {
namespace {

using namespace ucx_detail;

// The process's UCX worker and what its callbacks write into. Shared by the executor and every
// plan it prepared, and destroyed last: UCX may complete requests after the execution that
// posted them has ended.
struct Runtime {
  explicit Runtime(std::int32_t world) : inbox(world) {}
  Inbox inbox;
  Outbox outbox;
  InFlight<Flushed> flushes;
  std::uint64_t epoch = 0;         // executions so far; the same on every rank
  AllocatedRegions allocated;      // memory allocate_host() handed out
  std::unique_ptr<Worker> worker;  // declared last, so destroyed before what its callbacks use
};

// Adds a repair step's figures to its execution's. Elapsed then runs to the repair step's end.
void add_repair_figures(ExecutionReport& report, const ExecutionReport& repair,
                        SteadyClock::time_point start) {
  report.bytes_sent += repair.bytes_sent;
  report.bytes_received += repair.bytes_received;
  report.messages += repair.messages;
  report.stored_directly += repair.stored_directly;
  report.elapsed = seconds_since(start);
  auto& puts = *report.work.puts;
  for (std::size_t k = 0; k < puts.size(); ++k) puts[k] += (*repair.work.puts)[k];
  *report.work.pack_unpack += *repair.work.pack_unpack;
  *report.work.quantize += *repair.work.quantize;
}

// Holds the runtime, so the context outlives the memory it allocated.
class UcxHostAllocation final : public HostAllocation {
 public:
  UcxHostAllocation(std::shared_ptr<Runtime> runtime, std::shared_ptr<MemoryRegion> region,
                    std::int64_t bytes)
      : runtime_(std::move(runtime)),
        region_(std::move(region)),
        bytes_(region_->base(), static_cast<std::size_t>(bytes)) {}
  std::span<std::byte> bytes() const override { return bytes_; }

 private:
  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<MemoryRegion> region_;
  std::span<std::byte> bytes_;
};

class UcxPrepared final : public PreparedPlan {
 public:
  std::shared_ptr<Runtime> runtime;
  Plan plan;
  Rank rank;
  RankBuffers buffers;  // what a repair step's program is made over (repair_program.h)
  std::unique_ptr<lowering::LoweredPlan> lowered;  // from introduce() until the program takes it
  UcxProgram program;
  LocalRegions regions;
  std::unique_ptr<Connections> connections;  // closed before the regions are unregistered
};

class UcxExecutor final : public Executor {
 public:
  UcxExecutor(Bootstrap& bootstrap, ExecutorOptions options, std::shared_ptr<Runtime> runtime)
      : bootstrap_(bootstrap), options_(std::move(options)), runtime_(std::move(runtime)) {}

  std::string_view name() const override { return "ucx"; }
  ExecutorCapabilities capabilities() const override { return {.host_memory = true, .cuda_memory = false}; }

  [[nodiscard]] Result<std::unique_ptr<PreparedPlan>> prepare(const Plan& plan, Rank rank,
                                                              const RankBuffers& buffers) override {
    auto prepared = std::make_unique<UcxPrepared>();
    prepared->runtime = runtime_;
    prepared->plan = plan;
    prepared->rank = rank;
    prepared->buffers = buffers;
    // Each rank checks its buffers, then all compare plan hashes and staging.
    REFIT_TRY(check_same_settings(REFIT_TRY(agree(bootstrap_, introduce(*prepared, rank, buffers)))));
    // Each rank works out its part and registers its memory once; all exchange keys.
    const auto cards = REFIT_TRY(agree(bootstrap_, register_locally(*prepared, rank, buffers)));
    // Endpoints to every peer. Not propagated here: this rank's outcome goes to agree(), which
    // returns this rank's own error when it failed, so that its peers fail with it instead of
    // waiting in the handshake.
    auto connections = Connections::connect(*runtime_->worker, runtime_->inbox, rank, cards);
    REFIT_TRY(
        agree(bootstrap_, connections ? Result<std::string>("") : std::unexpected(connections.error())));
    // The handshake comes last, with no agreement after it: a rank that dies here is silent to
    // every peer's handshake, which fails naming it within the timeout, where an agreement after
    // it would wait another timeout for the dead rank.
    REFIT_TRY(shake_hands(rank, **connections));
    prepared->connections = std::move(*connections);
    std::vector<bool> mapped(static_cast<std::size_t>(bootstrap_.size()));
    for (const Send& send : prepared->program.sends())
      if (!mapped[static_cast<std::size_t>(send.peer.value)]) {
        prepared->connections->map_ahead(send.peer);
        mapped[static_cast<std::size_t>(send.peer.value)] = true;
      }
    return prepared;
  }

  [[nodiscard]] Result<ExecutionReport> execute(PreparedPlan& prepared) override {
    auto* p = dynamic_cast<UcxPrepared*>(&prepared);
    if (p == nullptr || p->runtime != runtime_)
      return invalid("execute: the plan was not prepared by this executor");
    // Two execution epochs each time, the second for a repair step, so that a rank with none to
    // run stays in step with those that had one.
    runtime_->epoch += 2;
    const auto start = SteadyClock::now();
    // Named: the engine keeps a reference to its context.
    auto first = context(*p, p->plan, p->program, runtime_->epoch - 1, nullptr);
    first.gate = gate_;
    Engine engine(first);
    auto report = engine.run();
    if (!report || !membership_) return report;
    return repair(*p, std::move(*report), engine.gone(), start);
  }

  // Elastic refit: every survivor ends the step with the same ranks gone, so all work out the same
  // repair plan and run it, or none does. It re-feeds the survivors whose data came through a rank
  // that went, straight from the training ranks, over the prepared registrations.
  [[nodiscard]] Result<ExecutionReport> repair(UcxPrepared& p, ExecutionReport report,
                                               const std::vector<bool>& gone, SteadyClock::time_point start) {
    const auto excluded = excluded_ranks(*membership_, gone);
    const auto dropped = dropped_transfers(p.plan, excluded);
    const Plan plan = repair_plan(p.plan, excluded, dropped);
    if (plan.transfers.empty()) return report;
    const auto program = REFIT_TRY(make_repair_program(plan, p.rank, p.buffers, p.program, options_.staging));
    if (gate_) gate_->before_any_send();
    const auto second = context(p, plan, program, runtime_->epoch, &gone);
    Engine engine(second);
    const auto fixed = REFIT_TRY(engine.run());
    const auto& now_gone = engine.gone();
    report.engines = repaired_outcomes(p.plan, dropped, plan,
                                       dropped_transfers(plan, excluded_ranks(*membership_, now_gone)),
                                       *membership_, now_gone);
    add_repair_figures(report, fixed, start);
    return report;
  }

  ExecutionContext context(UcxPrepared& p, const Plan& plan, const UcxProgram& program, std::uint64_t epoch,
                           const std::vector<bool>* gone_before) const {
    Runtime& rt = *runtime_;
    return ExecutionContext{.plan = plan,
                            .program = program,
                            .worker = *rt.worker,
                            .inbox = rt.inbox,
                            .connections = *p.connections,
                            .regions = p.regions,
                            .options = options_,
                            .epoch = epoch,
                            .membership = membership_ ? &*membership_ : nullptr,
                            .outbox = rt.outbox,
                            .flushes = rt.flushes,
                            .gone_before = gone_before};
  }

  bool set_send_gate(SendGate* gate) override {
    gate_ = gate;
    return true;
  }

  // Only kept here: the prepared plans stay as they are, and execute() reads it.
  [[nodiscard]] Result<void> set_membership(const EngineMembership& membership) override {
    REFIT_TRY(check_set_membership(membership, bootstrap_.size()));
    membership_ = membership;
    return {};
  }

 private:
  [[nodiscard]] Result<std::unique_ptr<HostAllocation>> allocate(Bytes bytes) override {
    // UCX puts it in /dev/shm, for peers to map: too little there is refused here, not after
    // UCX's retries (a 12 GiB allocation took 23-46 s to fail).
    REFIT_TRY(check_host_memory(bytes, /*shared=*/true, read_host_memory_limits(), "allocate_host"));
    // ucp_mem_map refuses a zero length; one byte stands in for an empty allocation.
    auto region = REFIT_TRY(
        MemoryRegion::allocate(runtime_->worker->context(), std::max<std::int64_t>(bytes.value, 1)));
    auto shared = std::make_shared<MemoryRegion>(std::move(region));
    runtime_->allocated.add(shared, bytes.value);
    return std::make_unique<UcxHostAllocation>(runtime_, std::move(shared), bytes.value);
  }

  // This rank's own checks, the plan's first (LoweredPlan::make); it contributes its plan hash
  // and staging.
  [[nodiscard]] Result<std::string> introduce(UcxPrepared& prepared, Rank rank,
                                              const RankBuffers& buffers) const {
    const Plan& plan = prepared.plan;
    if (plan.world_size() != bootstrap_.size() || rank.value != bootstrap_.rank())
      return mismatch(
          fmt::format("the plan has {} ranks and this is rank {}, the bootstrap says rank {} of {}",
                      plan.world_size(), rank.value, bootstrap_.rank(), bootstrap_.size()));
    prepared.lowered = std::make_unique<lowering::LoweredPlan>(
        REFIT_TRY(lowering::LoweredPlan::make(plan, options_.staging)));
    REFIT_TRY(check_rank_buffers(plan, rank, buffers, MemoryKind::kHost));
    // The staging sets the chunks, so ranks must agree on it as on the plan.
    return encode_settings({{.name = "plan hash", .value = plan_hash_hex(plan)},
                            {.name = "staging bytes", .value = std::to_string(options_.staging.value)}});
  }

  // Works out this rank's part and registers its regions once; it contributes its card.
  [[nodiscard]] Result<std::string> register_locally(UcxPrepared& prepared, Rank rank,
                                                     const RankBuffers& buffers) const {
    prepared.program = REFIT_TRY(make_ucx_program(std::move(prepared.lowered), rank, buffers));
    if (membership_) reserve_repair_staging(prepared.program);
    prepared.regions = REFIT_TRY(register_regions(*runtime_->worker, prepared.program, runtime_->allocated));
    return make_card(*runtime_->worker, prepared.program, prepared.regions);
  }

  // A hello to and from every peer, so that connections are up in both directions.
  [[nodiscard]] Result<void> shake_hands(Rank rank, Connections& connections) const {
    Runtime& rt = *runtime_;
    const HandshakeParties parties{
        .worker = *rt.worker, .inbox = rt.inbox, .outbox = rt.outbox, .connections = connections};
    return handshake(parties, rank, rt.epoch, options_.timeout);
  }

  Bootstrap& bootstrap_;
  ExecutorOptions options_;
  std::shared_ptr<Runtime> runtime_;
  std::optional<EngineMembership> membership_;  // set: elastic refit
  SendGate* gate_ = nullptr;                    // Executor::set_send_gate
};

// What a worker's shared-memory transport takes of /dev/shm at start-up: its receive descriptors
// (4.29 MB measured, UCX 1.13's mm_posix) and its FIFO.
constexpr Bytes kWorkerSharedMemory{8 << 20};

}  // namespace

Result<std::unique_ptr<Executor>> make_ucx_executor(Bootstrap& bootstrap, const ExecutorOptions& options) {
  REFIT_TRY(check_options(options));
  ucx_detail::forward_log_to(options.on_transport_message);
  auto created = Worker::create();
  if (!created)
    return std::unexpected(
        shared_memory_shortage(created.error(), kWorkerSharedMemory, read_host_memory_limits()));
  auto worker = std::move(*created);
  auto runtime = std::make_shared<Runtime>(bootstrap.size());
  runtime->worker = std::move(worker);
  REFIT_TRY(listen(runtime->worker->get(), runtime->inbox));
  return std::make_unique<UcxExecutor>(bootstrap, options, std::move(runtime));
}

}  // namespace refit
