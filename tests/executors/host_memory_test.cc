// check_host_memory refuses an allocation beyond a limit of this process or host, naming the
// limit, what is left of it and the fix (refit run's tests make the limits real: ulimit -v and a
// small /dev/shm, tests/executors/run_cli_test.cc).
#include "refit/executors/host_memory.h"

#include <gtest/gtest.h>

namespace refit {
namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

TEST(HostMemory, EachLimitRefusesWhatPassesItNamingWhatIsLeft) {
  const HostMemoryLimits none{};
  EXPECT_TRUE(check_host_memory(Bytes{100 * kGiB}, true, none, "x"));
  const HostMemoryLimits address{.address_space_left = Bytes{3 * kGiB}};
  const auto a = check_host_memory(Bytes{4 * kGiB}, false, address, "allocate_host");
  ASSERT_FALSE(a);
  EXPECT_EQ(a.error().code, ErrorCode::kOutOfRange);
  EXPECT_EQ(a.error().message,
            "allocate_host: 4.00 GiB would pass this process's address-space limit, which has 3.00 GiB left: "
            "raise it "
            "(ulimit -v) or give the process fewer or smaller shards");
  EXPECT_TRUE(check_host_memory(Bytes{3 * kGiB}, false, address, "allocate_host"));
  const HostMemoryLimits group{.cgroup_left = Bytes{kGiB / 2}};
  EXPECT_NE(check_host_memory(Bytes{kGiB}, false, group, "x").error().message.find("512.0 MiB left"),
            std::string::npos);
  // /dev/shm bounds shared memory only.
  const HostMemoryLimits shm{.shared_memory_free = Bytes{kGiB}};
  EXPECT_TRUE(check_host_memory(Bytes{2 * kGiB}, false, shm, "x"));
  const auto s = check_host_memory(Bytes{2 * kGiB}, true, shm, "x");
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message.find("2.00 GiB of shared memory, but /dev/shm has 1.00 GiB free"),
            std::string::npos);
}

TEST(HostMemory, ATransportThatCouldNotStartIsBadInputOnlyWhenDevShmIsShort) {
  const Error cause{.code = ErrorCode::kRuntime, .message = "ucp_worker_create: No resources are available"};
  const auto short_of = shared_memory_shortage(cause, Bytes{8 << 20}, {.shared_memory_free = Bytes{1 << 20}});
  EXPECT_EQ(short_of.code, ErrorCode::kOutOfRange);
  EXPECT_NE(short_of.message.find("/dev/shm has 1.0 MiB free, less than the 8.0 MiB a UCX worker needs"),
            std::string::npos);
  EXPECT_EQ(shared_memory_shortage(cause, Bytes{8 << 20}, {.shared_memory_free = Bytes{kGiB}}).code,
            ErrorCode::kRuntime);
}

}  // namespace
}  // namespace refit
