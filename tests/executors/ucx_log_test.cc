// UCX's warnings and errors reach the executor's caller, a line each, and not stdout, where
// refit's callers read its results: a warning from a peer about a killed process once broke
// `refit run --json`.
#include "ucx_log.h"

#include <gtest/gtest.h>
#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>

#include <string>
#include <vector>

namespace refit {
namespace {

TEST(UcxLog, AWarningGoesToTheSinkNotStdout) {
  if (ucs_global_opts.log_file != nullptr && *ucs_global_opts.log_file != '\0')
    GTEST_SKIP() << "UCX_LOG_FILE is set: UCX writes there, as the user chose";
  std::vector<std::string> earlier, lines;
  ucx_detail::forward_log_to([&](std::string_view line) { earlier.emplace_back(line); });
  ucx_detail::forward_log_to([&](std::string_view line) { lines.emplace_back(line); });  // the latest wins
  ::testing::internal::CaptureStdout();
  ucs_log_dispatch(__FILE__, __LINE__, __func__, UCS_LOG_LEVEL_WARN, &ucs_global_opts.log_component,
                   "shmat(shmid=%d) failed", 7);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  EXPECT_TRUE(earlier.empty());
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("UCX WARN ucx_log_test.cc:"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(" shmat(shmid=7) failed"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace refit
