// refit run: perform a refit between the processes mpirun started, with a real executor, and
// report what moved how fast (with --verify: that every destination element is right).
//
//   mpirun -np N refit run PROBLEM [--cluster cpu-host] [--strategy S] [--executor ucx]
//                                  [--verify] [--iterations N] [--delta FRACTION
//                                  [--delta-frozen FRACTION] [--delta-rebalance DRIFT]]
//                                  [--timeout S] [--staging BYTES]
//                                  [--no-direct-stores] [--elastic] [--json]
//                                  [--join E [--from training|peers|both] [--peers LIST]]
//                                  [--storage framework [--load-sources DIR] [--save-destinations DIR]]
//
// The first ranks play the training side, the rest the inference side. Every rank plans on its
// own (plans are deterministic; the executor compares plan hashes), and the ranks agree on each
// step before the next, so a rank that fails makes every rank fail instead of leaving it waiting.
// With --elastic a rank that dies during the transfer costs only its own engine the step. With
// --join, engine E restarts after the full refit and is filled again by the join's processes
// alone (run_join.h).
#include <algorithm>
#include <chrono>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "command.h"
#include "parse.h"
#include "plan_inputs.h"
#include "refit/core/elapsed.h"
#include "refit/core/try.h"
#include "refit/executors/agreement.h"
#include "refit/executors/delta_executor.h"
#include "refit/executors/delta_step.h"
#include "refit/executors/host_shards.h"
#include "refit/executors/mpi_bootstrap.h"
#include "refit/executors/registry.h"
#include "refit/executors/sequenced_bootstrap.h"
#include "refit/executors/synthetic_shards.h"
#include "refit/facade/problem_source.h"
#include "refit/lowering/lowered_plan.h"
#include "refit/refit.h"
#include "resident_memory.h"
#include "run_faults.h"
#include "run_join.h"
#include "run_mpi_session.h"
#include "run_report.h"
#include "run_storage.h"
#include "say.h"
#include "transport_messages.h"

namespace refit::cli {
namespace {

struct RunOptions {
  PlanInputOptions inputs;
  StorageOptions storage;
  std::string executor = "ucx";
  bool verify = false;
  std::int32_t iterations = 1;
  std::optional<double> delta;  // --delta: the synthetic update's change fraction
  double delta_frozen = 0.0;    // --delta-frozen: the share of the tensors that never change
  double delta_rebalance = DeltaRebalance{}.max_drift;  // --delta-rebalance: the share drift that re-plans
  double timeout = ExecutorOptions{}.timeout.value;
  std::int64_t staging = ExecutorOptions{}.staging.value;
  bool no_direct_stores = false;
  bool elastic = false;  // --elastic: an engine that dies misses its step, the others complete
  JoinRunOptions join;   // --join, --peers, --from
  bool json = false;
  // Fault injection for the tests (hidden options).
  std::string fault;               // RANK:PHASE:ACTION, see run_faults.h
  std::int32_t perturb_rank = -1;  // this rank plans something else than the others
  std::int32_t short_rank = -1;    // this rank hands prepare a buffer one byte short
  std::int32_t drift_rank = -1;    // --delta: this rank's first destination byte changes before step 2
};

// The bootstrap the executor gets (faults inside prepare) and the fault of this run, if any.
struct RankContext {
  Bootstrap& bootstrap;
  Bootstrap& executor_bootstrap;
  FaultInjector& faults;
  MpiSession& mpi;
};

// What a rank holds once it is ready for the collective part.
struct RankSetup {
  PlanInputs inputs;
  Plan plan;
  std::unique_ptr<Executor> executor;
  RunBuffers shards;  // from the executor's allocate_host
  // --delta: the sources' synthetic weights, stepped before every iteration but the first, and
  // what the destinations must hold.
  std::optional<SyntheticShards> weights;
  std::optional<EngineMembership> membership;  // --elastic: every engine a member
  std::optional<JoinRun> join;                 // --join: planned with the full refit
};

ExecutorOptions executor_options(const RunOptions& o, const Plan& plan, FaultInjector& faults) {
  return ExecutorOptions{.timeout = Seconds{o.timeout},
                         .staging = Bytes{o.staging},
                         .direct_stores = !o.no_direct_stores,
                         .on_chunk_sent = faults.on_chunk_sent(plan),
                         .interrupted = faults.interrupted(),
                         .on_transport_message = print_transport_message};
}

// What this run plans with: with --delta, for a delta refit.
PlanInputOptions planning(const RunOptions& o) {
  auto planning = o.inputs;
  planning.for_delta = o.delta.has_value();
  return planning;
}

// --delta: every rank re-plans by the bytes that move, unless the plan comes from a file, which
// nothing re-makes.
std::optional<DeltaRebalance> delta_rebalance(const RunOptions& o, const PlanInputs& inputs) {
  if (!o.inputs.plan_file.empty()) return std::nullopt;
  return refit::delta_rebalance(inputs.problem, inputs.cluster, o.inputs.strategy, planning(o).plan_options(),
                                o.delta_rebalance);
}

// The executor of this run; with --delta, a delta refit's over it (its bytes on the GPU with nccl).
[[nodiscard]] Result<std::unique_ptr<Executor>> run_executor(const RunOptions& o, const RankContext& c,
                                                             const Plan& plan, const PlanInputs& inputs) {
  const auto options = executor_options(o, plan, c.faults);
  if (!o.delta) return make_executor(o.executor, c.executor_bootstrap, options);
  return make_delta_executor(o.executor, c.executor_bootstrap, options, delta_rebalance(o, inputs));
}

[[nodiscard]] Result<RankSetup> set_up(const RunOptions& o, const RankContext& c) {
  Bootstrap& bootstrap = c.bootstrap;
  auto inputs = REFIT_TRY(load_plan_inputs(o.inputs));
  const auto& problem = inputs.problem;
  if (bootstrap.size() != problem.world_size())
    return mismatch(
        fmt::format("mpirun started {} process{}, the problem needs {} ({} training + {} inference "
                    "ranks): run it with mpirun -np {}",
                    bootstrap.size(), bootstrap.size() == 1 ? "" : "es", problem.world_size(),
                    problem.source_ranks(), problem.destination_ranks(), problem.world_size()));
  auto planned = REFIT_TRY(obtain_plan(planning(o), inputs, o.inputs.strategy));
  auto join = REFIT_TRY(plan_run_join(o.join, o.inputs, inputs));
  if (bootstrap.rank() == o.perturb_rank) planned.plan.strategy += " (perturbed)";
  auto executor = REFIT_TRY_IN(run_executor(o, c, planned.plan, inputs), "--executor");
  std::optional<EngineMembership> membership;
  if (o.elastic) {
    membership = REFIT_TRY_IN(engine_membership(o.inputs.problem, problem), "--elastic");
    REFIT_TRY_IN(executor->set_membership(*membership), "--elastic");
  }
  auto shards = REFIT_TRY(RunBuffers::make(o.storage, o.inputs.problem, problem, Rank{bootstrap.rank()},
                                           [&e = *executor](Bytes bytes) { return e.allocate_host(bytes); }));
  if (bootstrap.rank() == o.short_rank) REFIT_TRY(shards.shorten_a_buffer());
  std::optional<SyntheticShards> weights;
  if (o.delta)
    weights =
        REFIT_TRY_IN(SyntheticShards::make(problem, shards.buffers(),
                                           SyntheticUpdate{.change_fraction = *o.delta}, o.delta_frozen),
                     "--delta");
  return RankSetup{.inputs = std::move(inputs),
                   .plan = std::move(planned.plan),
                   .executor = std::move(executor),
                   .shards = std::move(shards),
                   .weights = std::move(weights),
                   .membership = std::move(membership),
                   .join = std::move(join)};
}

// --elastic: the rank's engine missed the step (a training rank never does).
bool engine_missed(const RankSetup& s, const RankResult& r) {
  if (!s.membership || !r.engines) return false;
  const auto engine = s.membership->engine_of[static_cast<std::size_t>(r.rank)];
  return std::ranges::find(r.engines->missed, engine) != r.engines->missed.end();
}

// Writes --save-destinations only for a rank whose weights are this step's and, with --verify,
// right: a missed engine's or a wrong rank's files would pass for good ones.
[[nodiscard]] Result<void> save_if_good(const RunOptions& o, Rank rank, const RankSetup& s,
                                        const RankResult& mine) {
  if (engine_missed(s, mine) || mine.wrong || (mine.join && mine.join->wrong)) return {};
  return s.shards.save(o.storage, rank);
}

// What a failed rank's message adds when it was to save its destinations.
std::string not_saved(const RunOptions& o) {
  return o.storage.save_destinations.empty() ? "" : " (its destinations were not saved)";
}

// Executions before memory is taken to have settled (pools, caches, first touches): a tenth.
std::int32_t warm_up_iterations(std::int32_t iterations) { return std::max(1, iterations / 10); }

Bytes resident_now() { return resident_bytes().value_or(Bytes{0}); }

// Execution i from a common start; destinations are zeroed before every execution but the first,
// so that --verify checks what the last one moved. A delta refit's step i changes the sources
// first (step 0 moves the initial weights) and keeps the destinations, which hold its baseline.
[[nodiscard]] Result<void> execute_once(const RankContext& c, RankSetup& s, PreparedPlan& prepared,
                                        std::int32_t i, RankResult& r) {
  if (s.weights && i > 0) REFIT_TRY_IN(s.weights->advance(), "--delta");
  if (!s.weights && i > 0) s.shards.clear_destinations();
  // Elastic: no barrier, which a dead rank would hold up; the executor starts wherever its peers are.
  if (!s.membership) REFIT_TRY(c.bootstrap.barrier());
  const auto start = std::chrono::steady_clock::now();
  auto outcome = s.executor->execute(prepared);
  r.walls.push_back(seconds_since(start));
  // A peer may be dead or hung: do not wait for it in MPI_Finalize.
  if (!outcome || (outcome->engines && !outcome->engines->missed.empty())) c.mpi.abandon();
  const auto report = REFIT_TRY(std::move(outcome));
  r.sent = report.bytes_sent;
  r.received = report.bytes_received;
  r.stored_directly = report.stored_directly;
  r.elapsed = report.elapsed;
  r.work = report.work;
  r.engines = report.engines;
  if (report.delta) r.delta_steps.push_back(RankDeltaStep{.sent = report.bytes_sent, .delta = *report.delta});
  return {};
}

// --delta --verify checks every step, and names the first that went wrong.
void verify_step(const RunOptions& o, const RankSetup& s, std::int32_t i, RankResult& r) {
  if (!o.verify || !s.weights || r.wrong) return;
  if (auto ok = s.weights->verify(); !ok) r.wrong = fmt::format("step {}: {}", i, ok.error().message);
}

// --test-drift-on-rank: a write outside refit into the rank's first destination shard, which the
// next delta step must notice (the piece goes dense) and repair.
void drift(const RankBuffers& buffers) {
  for (const auto& d : buffers.destinations)
    if (!d.bytes.empty()) {
      d.bytes[0] ^= std::byte{0x10};
      return;
    }
}

// A long run shows on stderr (rank 0) how it goes, a tenth at a time.
void show_progress(const RunOptions& o, const RankContext& c, const RankResult& r, std::int32_t i) {
  constexpr std::int32_t kShownFrom = 20;
  if (c.bootstrap.rank() != 0 || o.iterations < kShownFrom || (i + 1) % (o.iterations / 10) != 0) return;
  say("refit run: iteration {} of {}: {:.3f} ms, resident {:.1f} MB\n", i + 1, o.iterations,
      r.walls.back().value * 1e3, static_cast<double>(resident_now().value) / 1e6);
}

// Prepares once, then executes --iterations times, noting resident memory after prepare, after
// the warm-up and at the end.
[[nodiscard]] Result<RankResult> transfer(const RunOptions& o, const RankContext& c, RankSetup& s) {
  const auto prepared =
      REFIT_TRY_IN(s.executor->prepare(s.plan, Rank{c.bootstrap.rank()}, s.shards.buffers()), "prepare");
  RankResult r{.rank = c.bootstrap.rank(),
               .sent = {},
               .received = {},
               .walls = {},
               .elapsed = {},
               .stored_directly = {},
               .work = {},
               .checked = o.verify,
               .wrong = {},
               .resident = {}};
  r.resident.after_prepare = resident_now();
  const auto warm_up = warm_up_iterations(o.iterations);
  for (std::int32_t i = 0; i < o.iterations; ++i) {
    if (i == 1) c.faults.at(FaultPhase::kBetween);
    if (i == 2 && c.bootstrap.rank() == o.drift_rank) drift(s.shards.buffers());
    REFIT_TRY_IN(execute_once(c, s, *prepared, i, r),
                 fmt::format("execute, iteration {} of {}", i + 1, o.iterations));
    verify_step(o, s, i, r);
    if (i + 1 == warm_up) r.resident.after_warm_up = resident_now();
    show_progress(o, c, r, i);
  }
  r.resident.end = resident_now();
  if (o.verify && !s.weights && !engine_missed(s, r))
    if (auto ok = s.shards.verify(s.inputs.problem); !ok) r.wrong = ok.error().message;
  return r;
}

// The run's settings, without any rank's figures.
RunSummary summary_of(const RunOptions& o, const RankSetup& s) {
  return RunSummary{.executor = o.executor,
                    .strategy = s.plan.strategy,
                    .plan_hash = plan_hash_hex(s.plan),
                    .training_ranks = s.inputs.problem.source_ranks(),
                    .inference_ranks = s.inputs.problem.destination_ranks(),
                    .verify = o.verify,
                    .warm_up_iterations = warm_up_iterations(o.iterations),
                    .delta = o.delta,
                    .ranks = {},
                    .engines = {},
                    .join = s.join
                                ? std::optional(join_summary(
                                      *s.join, static_cast<std::int32_t>(s.inputs.problem.tensors().size())))
                                : std::nullopt};
}

[[nodiscard]] Result<void> report(const RunOptions& o, Bootstrap& bootstrap, const RankSetup& s,
                                  const Result<RankResult>& mine) {
  const auto all = REFIT_TRY_IN(
      agree(bootstrap, mine ? Result<std::string>(encode(*mine)) : std::unexpected(mine.error())), "report");
  auto summary = summary_of(o, s);
  for (const auto& text : all) summary.ranks.push_back(REFIT_TRY(decode_rank_result(text)));
  if (bootstrap.rank() == 0) print_summary(summary, o.json);
  for (const auto& r : summary.ranks) {
    if (r.wrong)
      return fail(ErrorCode::kRuntime,
                  fmt::format("verification failed on rank {}{}: {}", r.rank, not_saved(o), *r.wrong));
    if (r.join && r.join->wrong)
      return fail(ErrorCode::kRuntime,
                  fmt::format("verification failed on rank {} after the join: {}", r.rank, *r.join->wrong));
  }
  return {};
}

// --elastic: the report is this rank's own, printed by rank 0, with the engines that completed and
// missed the step. No rank gathers from the others, which may be dead; each rank of a completed
// engine checked its own destinations, and fails when they are wrong, as does a rank of a missed
// engine, whose weights are not this step's.
[[nodiscard]] Result<void> report_elastic(const RunOptions& o, Bootstrap& bootstrap, const RankSetup& s,
                                          const RankResult& mine) {
  auto summary = summary_of(o, s);
  summary.ranks = {mine};
  summary.engines = mine.engines;
  if (bootstrap.rank() == 0) print_summary(summary, o.json);
  if (engine_missed(s, mine))
    return fail(ErrorCode::kPeerFailed,
                fmt::format("engine {} missed the step: it keeps weights that are not this step's{}",
                            s.membership->engine_of[static_cast<std::size_t>(mine.rank)], not_saved(o)));
  if (mine.wrong)
    return fail(ErrorCode::kRuntime, fmt::format("verification failed{}: {}", not_saved(o), *mine.wrong));
  return {};
}

// What every rank must have been given alike, the options first so that a difference is named by
// its option: what changes the problem, the plan or what a rank does with it.
std::vector<Setting> settings(const RunOptions& o, const RankSetup& s) {
  const auto& m = o.inputs.problem.model_options;
  auto out = std::vector<Setting>{
      {.name = "--strategy", .value = o.inputs.strategy},
      {.name = "--chunk", .value = std::to_string(o.inputs.chunk_bytes)},
      {.name = "--quantize", .value = m.quantize},
      {.name = "--quantize-at", .value = m.quantize_at},
      {.name = "--executor", .value = o.executor},
      {.name = "--iterations", .value = std::to_string(o.iterations)},
      {.name = "--delta", .value = o.delta ? fmt::format("{}", *o.delta) : "not given"},
      {.name = "--delta-frozen", .value = fmt::format("{}", o.delta_frozen)},
      {.name = "--delta-rebalance", .value = fmt::format("{}", o.delta_rebalance)},
      {.name = "--staging", .value = std::to_string(o.staging)},
      {.name = "--storage", .value = o.storage.storage},
      {.name = "--verify", .value = o.verify ? "given" : "not given"},
      {.name = "--elastic", .value = o.elastic ? "given" : "not given"},
      {.name = "--timeout", .value = fmt::format("{}", o.timeout)},
      {.name = "problem", .value = fmt::format("{:016x}", problem_fingerprint(s.inputs.problem))},
      {.name = "plan hash", .value = plan_hash_hex(s.plan)}};
  std::ranges::move(join_settings(o.join, s.join), std::back_inserter(out));
  return out;
}

// --join: this rank's part in the join, after the full refit.
[[nodiscard]] Result<RankResult> take_part_in_join(const RunOptions& o, const RankContext& c, RankSetup& s,
                                                   RankResult mine, JoinWorld& world) {
  const JoinStep step{.run = *s.join,
                      .executor = o.executor,
                      .options = ExecutorOptions{.timeout = Seconds{o.timeout},
                                                 .staging = Bytes{o.staging},
                                                 .direct_stores = !o.no_direct_stores,
                                                 .on_chunk_sent = {},
                                                 .interrupted = {},
                                                 .on_transport_message = print_transport_message},
                      .verify = o.verify,
                      .storage = o.storage,
                      .source = o.inputs.problem,
                      .problem = s.inputs.problem};
  auto joined = perform_join(step, Rank{c.bootstrap.rank()}, s.shards, world);
  if (world.broken()) c.mpi.abandon();
  mine.join = REFIT_TRY(std::move(joined));
  return mine;
}

// Each phase's errors say which phase it was: set-up, prepare, execute (which iteration), join,
// report.
[[nodiscard]] Result<void> run_rank(const RunOptions& o, const RankContext& c) {
  c.faults.at(FaultPhase::kSetUp);
  // Declared first, so that it outlives the buffers its executor allocated (--join).
  JoinWorld join_world;
  auto setup = set_up(o, c);
  // Every rank learns whether every rank is set up alike before anything collective starts.
  const Result<std::string> ready =
      setup ? Result<std::string>(encode_settings(settings(o, *setup))) : std::unexpected(setup.error());
  REFIT_TRY_IN(check_same_settings(REFIT_TRY_IN(agree(c.bootstrap, ready), "set-up")), "set-up");
  auto mine = REFIT_TRY(transfer(o, c, *setup));
  const Rank rank{c.bootstrap.rank()};
  if (o.elastic) {
    const auto saved = save_if_good(o, rank, *setup, mine);
    return saved ? report_elastic(o, c.bootstrap, *setup, mine) : saved;
  }
  // A rank whose join fails or that cannot write its output tells the others in the report
  // instead of leaving them waiting there.
  auto done = setup->join ? take_part_in_join(o, c, *setup, std::move(mine), join_world)
                          : Result<RankResult>(std::move(mine));
  if (const auto saved = done ? save_if_good(o, rank, *setup, *done) : Result<void>{}; !saved)
    done = std::unexpected(saved.error());
  return report(o, c.bootstrap, *setup, done);
}

[[nodiscard]] Result<void> run(const RunOptions& o) {
  std::optional<Fault> fault;
  if (!o.fault.empty()) fault = REFIT_TRY(parse_fault(o.fault));
  // A test built on a fault that can never act would pass without it.
  if (fault && fault->phase == FaultPhase::kBetween && o.iterations < 2)
    return invalid(
        "--test-fault: 'between' acts after the first of several executions: give --iterations 2 or more");
  MpiSession mpi;
  if (!mpi.ok()) return fail(ErrorCode::kRuntime, "MPI_Init failed (start refit run with mpirun)");
  auto mpi_bootstrap = REFIT_TRY(MpiBootstrap::create(MPI_COMM_WORLD, Seconds{o.timeout}));
  SequencedBootstrap bootstrap(mpi_bootstrap);
  if (fault && fault->rank >= bootstrap.size())
    return invalid(
        fmt::format("--test-fault: rank {} is not one of the job's {} ranks", fault->rank, bootstrap.size()));
  FaultInjector faults(fault, bootstrap.rank(), Seconds{o.timeout});
  FaultyBootstrap executor_bootstrap(bootstrap, faults);
  auto outcome = run_rank(
      o, RankContext{
             .bootstrap = bootstrap, .executor_bootstrap = executor_bootstrap, .faults = faults, .mpi = mpi});
  if (mpi_bootstrap.broken()) mpi.abandon();
  REFIT_TRY_IN(std::move(outcome), fmt::format("rank {}", bootstrap.rank()));
  REFIT_TRY_IN(faults.check_acted(), fmt::format("rank {}", bootstrap.rank()));
  return {};
}

// --delta and what qualifies it.
void add_delta_options(CLI::App& cmd, RunOptions& o) {
  cmd.add_option("--delta", o.delta,
                 "Delta refit (docs/delta.md): the training ranks hold synthetic weights of which this "
                 "fraction of the elements changes by a small random step before every iteration but "
                 "the first, and each iteration moves per piece only what changed since the receiver's "
                 "bytes (bf16 and fp32 tensors, and with --quantize the fp8 values and scales the senders "
                 "or the landing ranks make, or those trained in fp8; logical storage; refit and direct "
                 "plans, not gather-broadcast); with --verify every step is checked, fp8 against what the "
                 "quantizer makes of that step's bf16; with --executor nccl the pieces and the codec are on "
                 "each rank's GPU (the GPU codec: no zstd)")
      ->check(fraction())
      ->excludes("--load-sources");
  cmd.add_option("--delta-frozen", o.delta_frozen,
                 "With --delta: this fraction of the tensors, the first in the model's order (frozen bottom "
                 "layers), never changes (default 0)")
      ->check(fraction())
      ->needs("--delta");
  cmd.add_option(
         "--delta-rebalance", o.delta_rebalance,
         fmt::format("With --delta: every rank re-plans by the step's payload sizes after a step whose "
                     "payload shares over the tensors drift from the plan's by more than this "
                     "total-variation distance (docs/delta.md; default {:g}, 1 never re-plans; not with "
                     "--plan)",
                     DeltaRebalance{}.max_drift))
      ->check(fraction())
      ->needs("--delta")
      ->excludes("--plan");
}

}  // namespace

Action add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  o->inputs.cluster.preset = "cpu-host";
  auto* cmd = app.add_subcommand(
      "run",
      "Perform a refit between the processes of an mpirun job (the first ranks are the training "
      "side, the rest the inference side) and report the throughput");
  add_plan_input_options(*cmd, o->inputs, /*with_plan_file=*/true);
  add_storage_options(*cmd, o->storage);
  cmd->add_option("--executor", o->executor,
                  fmt::format("Executor: {} (default ucx)", fmt::join(executor_names(), ", ")))
      ->check(accepted_by(check_executor_name, "EXECUTOR"));
  cmd->add_flag("--verify", o->verify,
                "Check every destination element against the source pattern (not with --load-sources, "
                "which replaces the pattern)")
      ->excludes("--load-sources");
  cmd->add_option("--iterations", o->iterations,
                  "Refits to perform with one prepared plan, as an RL job does once per step; the "
                  "report gives the median and the first (default 1)")
      ->check(positive());
  add_delta_options(*cmd, *o);
  cmd->add_option(
         "--timeout", o->timeout,
         fmt::format("Longest wait on a peer, in seconds, before every rank fails (default {:g}); it "
                     "bounds the steps where ranks wait for each other too, so it must exceed the "
                     "slowest rank's planning and verification; at most {:g} (11.6 days)",
                     ExecutorOptions{}.timeout.value, kMaxTimeout.value))
      ->check(seconds_within(kMinTimeout, kMaxTimeout));
  cmd->add_option("--staging", o->staging,
                  fmt::format("Staging bytes per rank for packing strided pieces (default {} MiB)",
                              lowering::kDefaultStaging.value >> 20))
      ->check(bytes_at_least(lowering::kMinStaging.value));
  cmd->add_flag("--no-direct-stores", o->no_direct_stores,
                "Put every chunk through UCX (ucp_put_nbx), also into peers whose memory is mapped into "
                "this process; by default such puts are stores made directly into that memory (on "
                "x86-64 non-temporal ones, which do not read the destination into the cache first)");
  cmd->add_flag("--elastic", o->elastic,
                "Elastic refit (docs/elastic.md): an inference engine whose rank dies or fails misses the "
                "step and every other engine completes; the report (rank 0's own) lists the engines that "
                "completed and missed; a rank of a missed engine exits 1 (UCX executor, not with --delta)")
      ->excludes("--delta");
  add_join_options(*cmd, o->join);
  cmd->get_option("--join")->excludes("--elastic")->excludes("--delta");
  cmd->add_flag("--json", o->json, "Print one JSON object on stdout (rank 0)");
  // Hidden, for the fault tests: see run_faults.h.
  cmd->add_option("--test-fault", o->fault)->group("");
  cmd->add_option("--test-perturb-plan-on-rank", o->perturb_rank)->group("");
  cmd->add_option("--test-short-buffer-on-rank", o->short_rank)->group("");
  cmd->add_option("--test-drift-on-rank", o->drift_rank)->group("");
  return [o] { return run(*o); };
}

}  // namespace refit::cli
