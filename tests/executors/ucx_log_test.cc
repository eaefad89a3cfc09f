// UCX's warnings and errors reach stderr, a line each, and not stdout, where refit's callers read
// its results: a warning from a peer about a killed process once broke `refit run --json`.
#include "ucx_log.h"

#include <gtest/gtest.h>
#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>

namespace refit {
namespace {

TEST(UcxLog, AWarningGoesToStderrNotStdout) {
  if (ucs_global_opts.log_file != nullptr && *ucs_global_opts.log_file != '\0')
    GTEST_SKIP() << "UCX_LOG_FILE is set: UCX writes there, as the user chose";
  ucx_detail::log_to_stderr();
  ucx_detail::log_to_stderr();  // once per process however often it is asked
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  ucs_log_dispatch(__FILE__, __LINE__, __func__, UCS_LOG_LEVEL_WARN, &ucs_global_opts.log_component,
                   "shmat(shmid=%d) failed", 7);
  const auto out = ::testing::internal::GetCapturedStdout();
  const auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find("UCX WARN "), std::string::npos) << err;
  EXPECT_NE(err.find("shmat(shmid=7) failed\n"), std::string::npos) << err;
  EXPECT_EQ(err.find("shmat(shmid=7) failed"), err.rfind("shmat(shmid=7) failed"))
      << "printed twice: " << err;
}

}  // namespace
}  // namespace refit
