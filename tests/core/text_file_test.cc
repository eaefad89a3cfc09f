// Reading and writing whole files (refit/core/text_file.h): what is read and what is refused.
#include "refit/core/text_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "error_code.h"

namespace refit {
namespace {

TEST(TextFile, AFileOfProcIsReadToItsEndThoughItsSizeSaysZero) {
  // /proc/self/status reports 0 bytes and holds a few hundred; it was once read as empty.
  ASSERT_EQ(std::filesystem::file_size("/proc/self/status"), 0u);
  const auto text = read_text_file("/proc/self/status");
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_TRUE(text->starts_with("Name:")) << *text;
}

TEST(TextFile, OutputsThatAreNotFilesOrAFifoNobodyReadsAreRefusedNamingThem) {
  const auto dir = std::filesystem::temp_directory_path();
  auto out = open_output_file(dir);
  ASSERT_FALSE(out);
  EXPECT_EQ(testing::error_code(out), ErrorCode::kInvalidArgument);
  EXPECT_NE(out.error().message.find("is a directory"), std::string::npos) << out.error().message;
  const auto fifo = dir / ("refit_text_file_fifo_" + std::to_string(::getpid()));
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  out = open_output_file(fifo);
  std::filesystem::remove(fifo);
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message.find(fifo.string() + ": a FIFO that no process reads"), std::string::npos)
      << out.error().message;
  EXPECT_TRUE(open_output_file("/dev/null")) << "a character device is written";
}

}  // namespace
}  // namespace refit
