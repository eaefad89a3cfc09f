// A refit between the processes of an MPI job: 2 training ranks hold a tensor split by rows, 2
// inference ranks need it split by columns. Every process plans the same plan, prepares it on the
// UCX executor once and refits twice (as an RL job does every step), then checks its elements.
//
//   mpirun -np 4 refit_between_processes
#include <cstdio>

#include <mpi.h>

#include <refit/executors/mpi_bootstrap.h>
#include <refit/refit.h>

namespace {

// One bf16 [1024, 512] weight: rows over the 2 training ranks, columns over the 2 inference ranks.
refit::Result<refit::ReshardProblem> weight_problem() {
  const refit::Shape shape{1024, 512};
  auto spec = REFIT_TRY(refit::make_tensor_spec("w", shape, refit::DType::kBF16));
  auto train = REFIT_TRY(
      refit::Layout::make(shape, REFIT_TRY(refit::Mesh::make({2}, {refit::Rank{0}, refit::Rank{1}})),
                          {refit::Placement::shard(0)}));
  auto infer = REFIT_TRY(
      refit::Layout::make(shape, REFIT_TRY(refit::Mesh::make({2}, {refit::Rank{2}, refit::Rank{3}})),
                          {refit::Placement::shard(1)}));
  return refit::ReshardProblem::make({{std::move(spec), std::move(train), std::move(infer)}}, 2, 2);
}

refit::Result<refit::ExecutionReport> refit_twice(refit::Bootstrap& bootstrap) {
  const auto problem = REFIT_TRY(weight_problem());
  // One node of processes sharing memory: the cpu-host preset, sized to the job.
  const auto cluster = REFIT_TRY(refit::load_cluster({.preset = "cpu-host"}, refit::job_of(problem)));
  const auto plan = REFIT_TRY(refit::plan(problem, cluster.placed));
  auto executor = REFIT_TRY(refit::make_executor("ucx", bootstrap, refit::ExecutorOptions{}));
  const refit::Rank me{bootstrap.rank()};
  // Sources hold the test pattern, destinations start zeroed.
  auto shards = REFIT_TRY(
      refit::HostShards::allocate(problem, me, [&](refit::Bytes b) { return executor->allocate_host(b); }));
  auto prepared = REFIT_TRY(executor->prepare(plan, me, shards.buffers()));
  refit::ExecutionReport report;
  for (int step = 0; step < 2; ++step) {
    shards.clear_destinations();
    report = REFIT_TRY(executor->execute(*prepared));
  }
  REFIT_TRY(shards.verify(problem));
  return report;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 0;
  {
    auto bootstrap = refit::MpiBootstrap::create(MPI_COMM_WORLD, refit::Seconds{60});
    const auto report = bootstrap ? refit_twice(*bootstrap) : std::unexpected(bootstrap.error());
    const int rank = bootstrap ? bootstrap->rank() : -1;
    if (report)
      std::printf("rank %d: sent %lld bytes, received %lld bytes, verified\n", rank,
                  static_cast<long long>(report->bytes_sent.value),
                  static_cast<long long>(report->bytes_received.value));
    else
      std::fprintf(stderr, "rank %d: %s\n", rank, report.error().message.c_str());
    code = report ? 0 : (report.error().is_bad_input() ? 2 : 1);
  }
  MPI_Finalize();
  return code;
}
