#include "run_join.h"

#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "parse.h"
#include "refit/core/elapsed.h"
#include "refit/core/try.h"
#include "refit/executors/registry.h"

namespace refit::cli {

void add_join_options(CLI::App& cmd, JoinRunOptions& o) {
  auto* join = cmd.add_option(
      "--join", o.engine,
      "Elastic refit (docs/elastic.md): after the full refit, this engine (an index of --infer's "
      "engines) restarts, its processes dropping their weights for fresh zeroed memory and a fresh "
      "executor, and is filled again by its join alone: only the join's processes take part, the "
      "others (the training ranks with --from peers) are free; with --verify the restarted engine "
      "checks every byte; the report's \"join\" says who took part and what each side sent "
      "(--model with engines=N; not with --elastic or --delta)");
  cmd.add_option("--peers", o.peers,
                 "With --join: the live engines that send from their own weights, e.g. 0,2 (default: every "
                 "other engine)")
      ->needs(join);
  cmd.add_option("--from", o.from,
                 "With --join: who sends the restarted engine its weights: peers (the training ranks send "
                 "nothing and are free), training, or both (each tensor from the side that finishes it "
                 "sooner; default)")
      ->needs(join)
      ->check(accepted_by(
          [](std::string_view name) -> Result<void> {
            REFIT_TRY(parse_join_source(name));
            return {};
          },
          "SOURCE"));
}

Result<std::optional<JoinRun>> plan_run_join(const JoinRunOptions& o, const PlanInputOptions& inputs,
                                             const PlanInputs& loaded) {
  if (!o.engine) return std::nullopt;
  const auto engines = REFIT_TRY_IN(inference_engines(inputs.problem), "--join");
  const JoinRequest request{.joining = *o.engine,
                            .peers = REFIT_TRY(parse_engine_list(o.peers, "--peers")),
                            .from = REFIT_TRY_IN(parse_join_source(o.from), "--from")};
  return REFIT_TRY(plan_join(loaded.problem, loaded.cluster, engines, request, inputs.strategy,
                             PlanOptions{.chunk = Bytes{inputs.chunk_bytes}}));
}

std::vector<Setting> join_settings(const JoinRunOptions& o, const std::optional<JoinRun>& run) {
  return {{.name = "--join", .value = o.engine ? std::to_string(*o.engine) : "not given"},
          {.name = "--peers", .value = o.peers},
          {.name = "--from", .value = o.from},
          {.name = "join plan hash", .value = run ? plan_hash_hex(run->plan) : "none"}};
}

JoinSummary join_summary(const JoinRun& run, std::int32_t tensors) {
  JoinSummary s{.engine = run.options.joining,
                .peers = run.options.peers,
                .from = std::string(join_source_name(run.options.source)),
                .plan_hash = plan_hash_hex(run.plan),
                .world = {},
                .peer_tensors = run.join.peer_tensors,
                .tensors = tensors};
  for (const Rank g : run.world()) s.world.push_back(g.value);
  return s;
}

Result<Bootstrap*> JoinWorld::open(const std::vector<Rank>& ranks, Seconds timeout) {
  std::vector<int> members;
  for (const Rank r : ranks) members.push_back(r.value);
  MPI_Group world = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
  MPI_Comm comm = MPI_COMM_NULL;
  // MPI_Comm_create_group is collective over the group's members only: the free ranks call nothing.
  constexpr int kTag = 33;
  const bool made =
      MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS &&
      MPI_Group_incl(world, static_cast<int>(members.size()), members.data(), &group) == MPI_SUCCESS &&
      MPI_Comm_create_group(MPI_COMM_WORLD, group, kTag, &comm) == MPI_SUCCESS;
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  if (world != MPI_GROUP_NULL) MPI_Group_free(&world);
  if (!made || comm == MPI_COMM_NULL)
    return fail(ErrorCode::kRuntime, "MPI could not make the join's communicator (MPI_Comm_create_group)");
  auto bootstrap = MpiBootstrap::create(comm, timeout);  // works on a duplicate of `comm`
  MPI_Comm_free(&comm);
  mpi_.emplace(REFIT_TRY(std::move(bootstrap)));
  sequenced_.emplace(*mpi_);
  return &*sequenced_;
}

namespace {

[[nodiscard]] Result<void> restart(const JoinStep& s, Rank global, RunBuffers& shards, Executor& executor) {
  shards = REFIT_TRY(RunBuffers::make(s.storage, s.source, s.problem, global,
                                      [&executor](Bytes bytes) { return executor.allocate_host(bytes); }));
  return {};
}

}  // namespace

Result<RankJoin> perform_join(const JoinStep& s, Rank global, RunBuffers& shards, JoinWorld& world) {
  const auto part = s.run.part(global);
  RankJoin out{.role = std::string(join_role_name(part.role)),
               .join_rank = part.rank ? part.rank->value : -1,
               .sent = {},
               .received = {},
               .wall = {},
               .checked = false,
               .wrong = std::nullopt};
  if (!part.rank) return out;
  Bootstrap& bootstrap = *REFIT_TRY_IN(world.open(s.run.world(), s.options.timeout), "join");
  auto executor = REFIT_TRY_IN(make_executor(s.executor, bootstrap, s.options), "--executor");
  if (part.role == JoinRole::kJoining) REFIT_TRY_IN(restart(s, global, shards, *executor), "join: restart");
  const auto prepared =
      REFIT_TRY_IN(executor->prepare(s.run.plan, *part.rank, join_buffers(s.run, global, shards.buffers())),
                   "join: prepare");
  REFIT_TRY_IN(bootstrap.barrier(), "join");
  const auto start = std::chrono::steady_clock::now();
  const auto report = REFIT_TRY_IN(executor->execute(*prepared), "join: execute");
  out.wall = seconds_since(start);
  out.sent = report.bytes_sent;
  out.received = report.bytes_received;
  if (s.verify && part.role == JoinRole::kJoining) {
    out.checked = true;
    if (auto ok = shards.verify(s.problem); !ok) out.wrong = ok.error().message;
  }
  world.keep(std::move(executor));
  return out;
}

}  // namespace refit::cli
