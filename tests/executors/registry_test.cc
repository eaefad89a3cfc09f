// The registry lists the backends this build has and refuses others, naming what it has.
#include <gtest/gtest.h>

#include <algorithm>

#include "error_code.h"
#include "refit/executors/registry.h"
#include "thread_bootstrap.h"

namespace refit {
namespace {

TEST(Registry, ListsTheUcxExecutorWhenBuilt) {
  const auto names = executor_names();
  EXPECT_NE(std::ranges::find(names, "ucx"), names.end());
}

TEST(Registry, MakesTheUcxExecutor) {
  testing::ThreadGroup group(1);
  testing::ThreadBootstrap bootstrap(group, 0);
  auto e = make_executor("ucx", bootstrap, {});
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ((*e)->name(), "ucx");
  EXPECT_TRUE((*e)->capabilities().host_memory);
}

TEST(Registry, HostMemoryBeyondTheHostIsRefusedBeforeAnythingIsMapped) {
  // UCX once filled /dev/shm towards a 2^62-byte request until the kernel killed the process,
  // leaving the file behind. Every executor checks the size against the host's memory first.
  testing::ThreadGroup group(1);
  testing::ThreadBootstrap bootstrap(group, 0);
  auto e = make_executor("ucx", bootstrap, {});
  ASSERT_TRUE(e) << e.error().message;
  for (const std::int64_t bytes : {std::int64_t{1} << 62, std::int64_t{-1}}) {
    const auto a = (*e)->allocate_host(Bytes{bytes});
    ASSERT_FALSE(a) << bytes;
    EXPECT_EQ(a.error().code, ErrorCode::kOutOfRange);
    EXPECT_NE(a.error().message.find(std::to_string(bytes) + " bytes, where this host has"),
              std::string::npos)
        << a.error().message;
  }
  const auto small = (*e)->allocate_host(Bytes{4096});
  ASSERT_TRUE(small) << small.error().message;
  EXPECT_EQ((*small)->bytes().size(), 4096u);
}

TEST(Registry, RefusesAnUnknownExecutorNamingTheKnownOnes) {
  testing::ThreadGroup group(1);
  testing::ThreadBootstrap bootstrap(group, 0);
  const auto e = make_executor("carrier-pigeon", bootstrap, {});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, ErrorCode::kNotFound);
  EXPECT_NE(e.error().message.find("'carrier-pigeon'"), std::string::npos);
  EXPECT_NE(e.error().message.find("ucx"), std::string::npos);
}

TEST(Registry, RefusesABackendThisBuildLacksAsUnsupported) {
  const auto names = executor_names();
  if (std::ranges::find(names, "nccl") != names.end()) GTEST_SKIP() << "this build has the NCCL executor";
  testing::ThreadGroup group(1);
  testing::ThreadBootstrap bootstrap(group, 0);
  const auto e = make_executor("nccl", bootstrap, {});
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(e.error().message.find("'nccl'"), std::string::npos);
}

// UCX runs one plan rank per process wherever its host starts it: a device, or several plan ranks
// in one process, are refused by name when the executor is made, for a full and a delta refit.
TEST(Registry, UcxRefusesAPlacementNamingWhatItTakes) {
  testing::ThreadGroup group(1);
  testing::ThreadBootstrap bootstrap(group, 0);
  for (const auto& placement :
       {DevicePlacement{.device = 0}, DevicePlacement{.comm_rank_of = std::vector<std::int32_t>{0, 0}}}) {
    const auto e = make_executor("ucx", bootstrap, {}, placement);
    ASSERT_FALSE(e);
    EXPECT_EQ(e.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(e.error().message.find("device, comm_rank_of: the ucx executor runs one plan rank per process"),
              std::string::npos)
        << e.error().message;
  }
  const auto delta = make_delta_executor("ucx", bootstrap, {}, std::nullopt, DevicePlacement{.device = 1});
  ASSERT_FALSE(delta);
  EXPECT_NE(delta.error().message.find("the ucx executor runs one plan rank per process"), std::string::npos)
      << delta.error().message;
  const auto several = make_delta_executor("ucx", bootstrap, {}, std::nullopt,
                                           DevicePlacement{.comm_rank_of = std::vector<std::int32_t>{0}});
  ASSERT_FALSE(several);
  EXPECT_NE(several.error().message.find("comm_rank_of: a delta refit runs one plan rank per process"),
            std::string::npos)
      << several.error().message;
}

// One plan rank per process: preparing several at once is refused by an executor that cannot.
TEST(Registry, UcxRefusesSeveralPlanRanksInOneProcess) {
  testing::ThreadGroup group(1);
  testing::ThreadBootstrap bootstrap(group, 0);
  auto e = make_executor("ucx", bootstrap, {});
  ASSERT_TRUE(e) << e.error().message;
  const auto prepared = (*e)->prepare_ranks(Plan{}, {});
  ASSERT_FALSE(prepared);
  EXPECT_EQ(prepared.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(prepared.error().message.find("prepare_ranks: the ucx executor runs one plan rank per process"),
            std::string::npos)
      << prepared.error().message;
}

// The UCX executor made with `options` on a world of one is refused, out of range, saying `why`.
void expect_ucx_refuses(const ExecutorOptions& options, const std::string& why) {
  testing::ThreadGroup group(1);
  testing::ThreadBootstrap bootstrap(group, 0);
  const auto e = make_executor("ucx", bootstrap, options);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, ErrorCode::kOutOfRange);
  EXPECT_NE(e.error().message.find(why), std::string::npos) << e.error().message;
}

TEST(Registry, UcxRefusesANonPositiveTimeout) {
  expect_ucx_refuses({.timeout = Seconds{0}}, "timeout must be at least 0.1 s");
}

// The staging must hold one chunk of the smallest (16 bytes) twice over (the half-staging rule):
// 31 bytes is refused when the executor is made, before any plan.
TEST(Registry, UcxRefusesAStagingBelowOneChunk) {
  expect_ucx_refuses({.staging = Bytes{31}}, "staging must be at least 32 bytes (one chunk's), got 31");
}

}  // namespace
}  // namespace refit
