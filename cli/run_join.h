#pragma once
// refit run --join E (docs/elastic.md): once the full refit has given every engine the current
// weights, engine E restarts and is filled again by the join (facade/join_run.h) from live
// engines (--from peers), the training ranks (training) or both. Only the join's processes take
// part, over an MPI communicator of their own that they alone create; every other process (the
// training ranks, with --from peers) calls nothing until the report. A restart is modelled inside
// the one MPI job: the engine's processes drop their buffers and allocate fresh, zeroed ones from
// a fresh executor (a restarted process could not rejoin an MPI world), and the peers send from
// the buffers the full refit wrote, not from a copy.
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "plan_inputs.h"
#include "refit/executors/agreement.h"
#include "refit/executors/mpi_bootstrap.h"
#include "refit/executors/sequenced_bootstrap.h"
#include "refit/facade/join_run.h"
#include "run_report.h"
#include "run_storage.h"

namespace refit::cli {

struct JoinRunOptions {
  std::optional<std::int32_t> engine;  // --join
  std::string peers;                   // --peers, e.g. "0,2"; empty: every other engine
  std::string from = std::string(join_source_name(JoinSource::kBoth));  // --from
};

void add_join_options(CLI::App& cmd, JoinRunOptions& options);

// The join, planned at set-up on every rank alike so that a bad --join is bad input before
// anything moves (nullopt without --join); errors name --join, --peers, --from or --infer.
[[nodiscard]] Result<std::optional<JoinRun>> plan_run_join(const JoinRunOptions& options,
                                                           const PlanInputOptions& inputs,
                                                           const PlanInputs& loaded);

// What every rank must have been given alike for the join.
std::vector<Setting> join_settings(const JoinRunOptions& options, const std::optional<JoinRun>& run);

// The join as every rank planned it, for the report.
JoinSummary join_summary(const JoinRun& run, std::int32_t tensors);

// The join's world on this process: its communicator and bootstrap, and the executor the join ran
// with, which holds the restarted engine's new memory. Kept until the buffers are gone.
class JoinWorld {
 public:
  JoinWorld() = default;
  JoinWorld(const JoinWorld&) = delete;
  JoinWorld& operator=(const JoinWorld&) = delete;
  // A collective of the join's bootstrap timed out: the process must exit without MPI_Finalize.
  bool broken() const { return mpi_ && mpi_->broken(); }

  // Over MPI_COMM_WORLD's `ranks` (join rank i is world rank ranks[i]), made by those alone.
  [[nodiscard]] Result<Bootstrap*> open(const std::vector<Rank>& ranks, Seconds timeout);
  void keep(std::unique_ptr<Executor> executor) { executor_ = std::move(executor); }

 private:
  std::optional<MpiBootstrap> mpi_;
  std::optional<SequencedBootstrap> sequenced_;
  std::unique_ptr<Executor> executor_;
};

// What this rank needs of the run to take its part in the join.
struct JoinStep {
  const JoinRun& run;
  std::string_view executor;  // --executor
  ExecutorOptions options;
  bool verify = false;
  const StorageOptions& storage;
  const ProblemSource& source;
  const ReshardProblem& problem;  // the full problem
};

// This rank's part in the join (none when it is free): a joining rank replaces `shards` (its
// buffers of the full refit) with fresh ones and, with --verify, checks them after the join; a
// peer or training rank sends from `shards` as they are.
[[nodiscard]] Result<RankJoin> perform_join(const JoinStep& step, Rank global, RunBuffers& shards,
                                            JoinWorld& world);

}  // namespace refit::cli
