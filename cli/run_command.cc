// refit run: perform a refit between the processes mpirun started, with a real executor, and
// report what moved how fast (with --verify: that every destination element is right).
//
//   mpirun -np N refit run PROBLEM [--cluster cpu-host] [--strategy S] [--executor ucx]
//                                  [--verify] [--iterations N] [--timeout S] [--staging BYTES]
//                                  [--no-direct-stores] [--json]
//
// The first ranks play the training side, the rest the inference side. Every rank plans on its
// own (plans are deterministic; the executor compares plan hashes), and the ranks agree on each
// step before the next, so a rank that fails makes every rank fail instead of leaving it waiting.
#include <chrono>
#include <csignal>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "command.h"
#include "parse.h"
#include "plan_inputs.h"
#include "refit/executors/agreement.h"
#include "refit/executors/host_shards.h"
#include "refit/executors/mpi_bootstrap.h"
#include "refit/executors/registry.h"
#include "run_mpi_session.h"
#include "run_report.h"

namespace refit::cli {
namespace {

struct RunOptions {
  PlanInputOptions inputs;
  std::string executor = "ucx";
  bool verify = false;
  std::int32_t iterations = 1;
  double timeout = ExecutorOptions{}.timeout.value;
  std::int64_t staging = ExecutorOptions{}.staging.value;
  bool no_direct_stores = false;
  bool json = false;
  // Fault injection for the tests (hidden options).
  std::int32_t kill_rank = -1;     // this rank kills itself after its first chunk is sent
  std::int32_t perturb_rank = -1;  // this rank plans something else than the others
  std::int32_t stall_rank = -1;    // this rank sleeps through three timeouts before it sets up
};

// What a rank holds once it is ready for the collective part.
struct RankSetup {
  PlanInputs inputs;
  Plan plan;
  std::unique_ptr<Executor> executor;
  HostShards shards;  // from the executor's allocate_host
};

ExecutorOptions executor_options(const RunOptions& o, std::int32_t rank) {
  ExecutorOptions e{.timeout = Seconds{o.timeout},
                    .staging = Bytes{o.staging},
                    .direct_stores = !o.no_direct_stores,
                    .on_chunk_sent = {}};
  if (rank == o.kill_rank) e.on_chunk_sent = [](std::int32_t, std::int64_t) { std::raise(SIGKILL); };
  return e;
}

Result<RankSetup> set_up(const RunOptions& o, Bootstrap& bootstrap) {
  auto inputs = load_plan_inputs(o.inputs);
  if (!inputs) return std::unexpected(inputs.error());
  const auto& problem = inputs->problem;
  if (bootstrap.size() != problem.world_size())
    return invalid(
        fmt::format("mpirun started {} process{}, the problem needs {} ({} training + {} inference "
                    "ranks): run it with mpirun -np {}",
                    bootstrap.size(), bootstrap.size() == 1 ? "" : "es", problem.world_size(),
                    problem.source_ranks(), problem.destination_ranks(), problem.world_size()));
  auto planned = obtain_plan(o.inputs, *inputs, o.inputs.strategy);
  if (!planned) return std::unexpected(planned.error());
  if (bootstrap.rank() == o.perturb_rank) planned->plan.strategy += " (perturbed)";
  auto executor = make_executor(o.executor, bootstrap, executor_options(o, bootstrap.rank()));
  if (!executor) return std::unexpected(std::move(executor.error()).in("--executor"));
  auto shards = HostShards::allocate(problem, Rank{bootstrap.rank()},
                                     [&e = **executor](Bytes bytes) { return e.allocate_host(bytes); });
  if (!shards) return std::unexpected(shards.error());
  return RankSetup{std::move(*inputs), std::move(planned->plan), std::move(*executor), std::move(*shards)};
}

// Prepares once, then executes --iterations times, each from a common start; destinations are
// zeroed before every execution but the first, so --verify checks what the last one moved.
Result<RankResult> transfer(const RunOptions& o, Bootstrap& bootstrap, RankSetup& s, MpiSession& mpi) {
  auto prepared = s.executor->prepare(s.plan, Rank{bootstrap.rank()}, s.shards.buffers());
  if (!prepared) return std::unexpected(prepared.error());
  RankResult r{bootstrap.rank(), {}, {}, {}, {}, {}, o.verify, {}};
  for (std::int32_t i = 0; i < o.iterations; ++i) {
    if (i > 0) s.shards.clear_destinations();
    if (auto ok = bootstrap.barrier(); !ok) return std::unexpected(ok.error());
    const auto start = std::chrono::steady_clock::now();
    auto report = s.executor->execute(**prepared);
    r.walls.push_back(
        Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()});
    if (!report) {
      mpi.abandon();
      return std::unexpected(std::move(report.error()).in(fmt::format("iteration {}", i + 1)));
    }
    r.sent = report->bytes_sent;
    r.received = report->bytes_received;
    r.stored_directly = report->stored_directly;
    r.elapsed = report->elapsed;
  }
  if (o.verify)
    if (auto ok = s.shards.verify(s.inputs.problem); !ok) r.wrong = ok.error().message;
  return r;
}

Result<void> report(const RunOptions& o, Bootstrap& bootstrap, const RankSetup& s, const RankResult& mine) {
  auto all = bootstrap.allgather(encode(mine));
  if (!all) return std::unexpected(all.error());
  RunSummary summary{o.executor,
                     s.plan.strategy,
                     plan_hash_hex(s.plan),
                     s.inputs.problem.source_ranks(),
                     s.inputs.problem.destination_ranks(),
                     o.verify,
                     {}};
  for (const auto& text : *all) {
    auto r = decode_rank_result(text);
    if (!r) return std::unexpected(r.error());
    summary.ranks.push_back(*r);
  }
  if (bootstrap.rank() == 0) print_summary(summary, o.json);
  for (const auto& r : summary.ranks)
    if (r.wrong)
      return fail(ErrorCode::kRuntime, fmt::format("verification failed on rank {}: {}", r.rank, *r.wrong));
  return {};
}

Result<void> run_rank(const RunOptions& o, Bootstrap& bootstrap, MpiSession& mpi) {
  if (bootstrap.rank() == o.stall_rank)
    std::this_thread::sleep_for(std::chrono::duration<double>(3 * o.timeout));
  auto setup = set_up(o, bootstrap);
  const Result<std::string> ready = setup ? Result<std::string>("") : std::unexpected(setup.error());
  if (auto all = agree(bootstrap, ready); !all) return std::unexpected(all.error());
  auto mine = transfer(o, bootstrap, *setup, mpi);
  if (!mine) return std::unexpected(mine.error());
  return report(o, bootstrap, *setup, *mine);
}

Result<void> run(const RunOptions& o) {
  MpiSession mpi;
  if (!mpi.ok()) return fail(ErrorCode::kRuntime, "MPI_Init failed (start refit run with mpirun)");
  auto bootstrap = MpiBootstrap::create(MPI_COMM_WORLD, Seconds{o.timeout});
  if (!bootstrap) return std::unexpected(bootstrap.error());
  auto outcome = run_rank(o, *bootstrap, mpi);
  if (bootstrap->broken()) mpi.abandon();
  if (!outcome)
    return std::unexpected(std::move(outcome.error()).in(fmt::format("rank {}", bootstrap->rank())));
  return outcome;
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
  cmd->add_option("--executor", o->executor,
                  fmt::format("Executor: {} (default ucx)", fmt::join(executor_names(), ", ")));
  cmd->add_flag("--verify", o->verify, "Check every destination element against the source pattern");
  cmd->add_option("--iterations", o->iterations,
                  "Refits to perform with one prepared plan, as an RL job does once per step; the "
                  "report gives the median and the first (default 1)")
      ->check(positive());
  cmd->add_option("--timeout", o->timeout,
                  "Longest wait on a peer, in seconds, before every rank fails (default 60); it bounds "
                  "the steps where ranks wait for each other too, so it must exceed the slowest "
                  "rank's planning and verification")
      ->check(positive());
  cmd->add_option("--staging", o->staging,
                  "Staging bytes per rank for packing strided pieces (default 256 MiB)")
      ->check(positive());
  cmd->add_flag("--no-direct-stores", o->no_direct_stores,
                "Put every chunk through UCX (ucp_put_nbx), also into peers whose memory is mapped into "
                "this process; by default such puts are stores made directly into that memory (on "
                "x86-64 non-temporal ones, which do not read the destination into the cache first)");
  cmd->add_flag("--json", o->json, "Print one JSON object on stdout (rank 0)");
  cmd->add_option("--test-kill-rank", o->kill_rank)->group("");
  cmd->add_option("--test-perturb-plan-on-rank", o->perturb_rank)->group("");
  cmd->add_option("--test-stall-rank", o->stall_rank)->group("");
  return [o] { return run(*o); };
}

}  // namespace refit::cli
