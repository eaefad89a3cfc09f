// The baseline refit is measured against in bench/run_ucx_bench.sh: the gather-and-broadcast
// many RL frameworks use, with MPI. Two training ranks each hold half of every byte; rank 0
// gathers the other half, broadcasts everything to every rank in buffers of at most 1 GiB
// (MPI counts are ints), and each inference rank keeps the half it needs.
//
//   mpirun -np 4 mpi_bcast_bench --bytes 2147483648 --iterations 3
//
// Prints one line per iteration on rank 0: "seconds S bytes B" (B: the model's bytes).
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include <fmt/format.h>

namespace {

constexpr std::int64_t kPiece = std::int64_t{1} << 30;
constexpr int kTrainingRanks = 2;

struct Args {
  std::int64_t bytes = std::int64_t{2} << 30;
  int iterations = 3;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view key = argv[i];
    if (key == "--bytes") a.bytes = std::strtoll(argv[i + 1], nullptr, 10);
    if (key == "--iterations") a.iterations = std::atoi(argv[i + 1]);
  }
  return a;
}

// Calls f(offset, count) over [0, bytes) in pieces MPI can count.
template <class F>
void in_pieces(std::int64_t begin, std::int64_t bytes, F&& f) {
  for (std::int64_t at = begin; at < begin + bytes; at += kPiece)
    f(at, static_cast<int>(std::min(kPiece, begin + bytes - at)));
}

double one_refit(std::vector<char>& model, std::vector<char>& kept, std::int64_t bytes, int rank, int size) {
  const std::int64_t half = bytes / 2;
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  if (rank == 1)
    in_pieces(half, bytes - half, [&](std::int64_t at, int n) {
      MPI_Send(model.data() + at, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
    });
  if (rank == 0)
    in_pieces(half, bytes - half, [&](std::int64_t at, int n) {
      MPI_Recv(model.data() + at, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    });
  in_pieces(0, bytes,
            [&](std::int64_t at, int n) { MPI_Bcast(model.data() + at, n, MPI_BYTE, 0, MPI_COMM_WORLD); });
  if (rank >= kTrainingRanks) {
    const std::int64_t share = bytes / (size - kTrainingRanks);
    std::memcpy(kept.data(), model.data() + (rank - kTrainingRanks) * share, static_cast<std::size_t>(share));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return MPI_Wtime() - start;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const Args args = parse(argc, argv);
  if (size <= kTrainingRanks) {
    if (rank == 0) fmt::print(stderr, "mpi_bcast_bench: needs more than {} ranks\n", kTrainingRanks);
    MPI_Finalize();
    return 2;
  }
  std::vector<char> model(static_cast<std::size_t>(args.bytes), static_cast<char>(rank));
  std::vector<char> kept(
      rank >= kTrainingRanks ? static_cast<std::size_t>(args.bytes / (size - kTrainingRanks)) : 0);
  for (int i = 0; i < args.iterations; ++i) {
    const double seconds = one_refit(model, kept, args.bytes, rank, size);
    if (rank == 0) fmt::print("seconds {:.6f} bytes {}\n", seconds, args.bytes);
  }
  MPI_Finalize();
  return 0;
}
