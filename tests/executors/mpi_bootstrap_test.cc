// MpiBootstrap under mpirun (ctest starts it with 3 processes): rank and size are MPI's, the
// allgather returns every rank's bytes in rank order, whatever their sizes (empty included), and
// a collective a rank never joins fails after the timeout, naming that rank.
#include <mpi.h>

#include <gtest/gtest.h>

#include "refit/executors/mpi_bootstrap.h"

namespace refit {
namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

TEST(MpiBootstrap, RefusesANonPositiveTimeout) {
  const auto b = MpiBootstrap::create(MPI_COMM_WORLD, Seconds{0});
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().code, ErrorCode::kOutOfRange);
  EXPECT_NE(b.error().message.find("timeout"), std::string::npos) << b.error().message;
}

TEST(MpiBootstrap, RankAndSizeAreMpis) {
  auto b = MpiBootstrap::create();
  ASSERT_TRUE(b) << b.error().message;
  EXPECT_EQ(b->rank(), world_rank());
  EXPECT_EQ(b->size(), world_size());
}

// Rank r contributes r copies of the letter 'a'+r: rank 0 contributes nothing.
TEST(MpiBootstrap, AllgatherOfVariableSizeStrings) {
  auto b = MpiBootstrap::create();
  ASSERT_TRUE(b);
  const std::string mine(static_cast<std::size_t>(b->rank()), static_cast<char>('a' + b->rank()));
  const auto all = b->allgather(mine);
  ASSERT_TRUE(all) << all.error().message;
  ASSERT_EQ(all->size(), static_cast<std::size_t>(b->size()));
  for (int r = 0; r < b->size(); ++r)
    EXPECT_EQ((*all)[static_cast<std::size_t>(r)],
              std::string(static_cast<std::size_t>(r), static_cast<char>('a' + r)));
}

TEST(MpiBootstrap, AllgatherKeepsBinaryBytes) {
  auto b = MpiBootstrap::create();
  ASSERT_TRUE(b);
  const std::string mine{'\0', static_cast<char>(b->rank()), '\xff'};
  const auto all = b->allgather(mine);
  ASSERT_TRUE(all);
  for (int r = 0; r < b->size(); ++r)
    EXPECT_EQ((*all)[static_cast<std::size_t>(r)], (std::string{'\0', static_cast<char>(r), '\xff'}));
}

TEST(MpiBootstrap, BarrierAndRepeatedRoundsStayInStep) {
  auto b = MpiBootstrap::create();
  ASSERT_TRUE(b);
  for (int round = 0; round < 5; ++round) {
    ASSERT_TRUE(b->barrier());
    const auto all = b->allgather(std::to_string(round * 100 + b->rank()));
    ASSERT_TRUE(all);
    for (int r = 0; r < b->size(); ++r)
      EXPECT_EQ((*all)[static_cast<std::size_t>(r)], std::to_string(round * 100 + r));
  }
}

// The last rank never joins the allgather: every other rank gives up after the timeout (0.5 s)
// with kTimeout, naming that rank, and its bootstrap refuses any further collective. (Last in
// this file: the failed bootstraps keep their requests, and the ranks meet again on
// MPI_COMM_WORLD.)
TEST(MpiBootstrap, ATimeoutNamesTheRanksThatNeverArrived) {
  auto b = MpiBootstrap::create(MPI_COMM_WORLD, Seconds{0.5});
  ASSERT_TRUE(b);
  const int absent = b->size() - 1;
  if (b->rank() != absent) {
    const auto all = b->allgather("here");
    ASSERT_FALSE(all);
    EXPECT_EQ(all.error().code, ErrorCode::kTimeout);
    EXPECT_EQ(all.error().message, "rank " + std::to_string(absent) +
                                       " did not reach the bootstrap's allgather within 0.5 s: it died or "
                                       "hangs before it");
    EXPECT_TRUE(b->broken());
    EXPECT_FALSE(b->barrier());
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace refit

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (refit::world_rank() != 0) {  // one report is enough; failures still fail the rank
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int result = RUN_ALL_TESTS();
  MPI_Finalize();
  return result;
}
