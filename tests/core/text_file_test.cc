// Reading and writing whole files (refit/core/text_file.h): what is read and what is refused.
#include "refit/core/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

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
  auto out = OutputFile::open(dir);
  ASSERT_FALSE(out);
  EXPECT_EQ(testing::error_code(out), ErrorCode::kInvalidArgument);
  EXPECT_NE(out.error().message.find("is a directory"), std::string::npos) << out.error().message;
  const auto fifo = dir / ("refit_text_file_fifo_" + std::to_string(::getpid()));
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto unread = OutputFile::open(fifo);
  std::filesystem::remove(fifo);
  ASSERT_FALSE(unread);
  EXPECT_NE(unread.error().message.find(fifo.string() + ": a FIFO that no process reads"), std::string::npos)
      << unread.error().message;
  EXPECT_TRUE(OutputFile::open("/dev/null")) << "a character device is written";
}

TEST(TextFile, ADescriptorsPathIsWrittenThroughTheDescriptor) {
  // /proc/self/fd/N of a regular file: replacing the file under its name would leave the
  // descriptor (the shell's redirection of /dev/stdout) on the old, unlinked file.
  const auto path = std::filesystem::temp_directory_path() / ("refit_fd_" + std::to_string(::getpid()));
  std::FILE* f = std::fopen(path.c_str(), "w+");
  ASSERT_NE(f, nullptr);
  const auto through = "/proc/self/fd/" + std::to_string(::fileno(f));
  ASSERT_TRUE(write_file(through, [](std::ostream& s) { s << "through"; }));
  std::fseek(f, 0, SEEK_SET);
  char back[16] = {};
  EXPECT_EQ(std::fread(back, 1, sizeof back - 1, f), 7u);
  EXPECT_STREQ(back, "through");
  std::fclose(f);
  std::filesystem::remove(path);
}

// The files of `dir`, by name.
std::vector<std::string> files_in(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::ranges::sort(names);
  return names;
}

TEST(TextFile, AFileIsPutInPlaceWholeOrNotAtAll) {
  // Until commit() the old file is as it was; a writer that gives up or fails leaves it so, and
  // leaves no temporary beside it.
  const auto dir = std::filesystem::temp_directory_path() / ("refit_text_file_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directory(dir);
  const auto path = dir / "plan.json";
  ASSERT_TRUE(write_file(path, [](std::ostream& s) { s << "old"; }));
  {
    auto out = OutputFile::open(path);
    ASSERT_TRUE(out) << out.error().message;
    out->stream() << "new";
    EXPECT_EQ(read_text_file(path).value(), "old");
  }  // given up: never committed
  EXPECT_EQ(read_text_file(path).value(), "old");
  EXPECT_EQ(files_in(dir), std::vector<std::string>{"plan.json"});
  const auto failed = write_file(path, [](std::ostream& s) {
    s << "half";
    s.setstate(std::ios::badbit);  // as a full disk leaves the stream
  });
  ASSERT_FALSE(failed);
  EXPECT_EQ(testing::error_code(failed), ErrorCode::kRuntime);
  EXPECT_NE(failed.error().message.find(path.string() + ": cannot be written"), std::string::npos)
      << failed.error().message;
  EXPECT_EQ(read_text_file(path).value(), "old");
  EXPECT_EQ(files_in(dir), std::vector<std::string>{"plan.json"});
  std::filesystem::permissions(path,
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  ASSERT_TRUE(write_file(path, [](std::ostream& s) { s << "new"; }));
  EXPECT_EQ(read_text_file(path).value(), "new");
  EXPECT_EQ(files_in(dir), std::vector<std::string>{"plan.json"});
  EXPECT_EQ(std::filesystem::status(path).permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)
      << "a private file replaced stays private";
  // Through a link, as the shell's > writes: the file it names is replaced, the link stays.
  std::filesystem::create_symlink(path, dir / "link.json");
  ASSERT_TRUE(write_file(dir / "link.json", [](std::ostream& s) { s << "linked"; }));
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "link.json"));
  EXPECT_EQ(read_text_file(path).value(), "linked");
  EXPECT_EQ(files_in(dir), (std::vector<std::string>{"link.json", "plan.json"}));
  std::filesystem::remove_all(dir);
}

// A scratch folder of the test's own, removed with the object.
class ScratchDir {
 public:
  explicit ScratchDir(const std::filesystem::path& parent, const std::string& name)
      : path_(parent / (name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

TEST(TextFile, ALinkToADescriptorIsWrittenThroughItAndAFileUnderDevIsReplacedWhole) {
  // The tenth campaign's H3. A link to /proc/self/fd/N (as to /dev/stdout) must be written
  // through the descriptor like the path itself; before, the link was resolved to the file behind
  // the descriptor and that file replaced, leaving the descriptor on an unlinked file. A regular
  // file whose path starts /dev/ (/dev/shm, a tmpfs) is an ordinary file: it is replaced whole,
  // not truncated first.
  const ScratchDir dir(std::filesystem::temp_directory_path(), "refit_links");
  const auto file = dir.path() / "redirected";
  std::FILE* f = std::fopen(file.c_str(), "w+");
  ASSERT_NE(f, nullptr);
  const auto link = dir.path() / "to_fd";
  std::filesystem::create_symlink("/proc/self/fd/" + std::to_string(::fileno(f)), link);
  ASSERT_TRUE(write_file(link, [](std::ostream& s) { s << "through"; }));
  std::fseek(f, 0, SEEK_SET);
  char back[16] = {};
  EXPECT_EQ(std::fread(back, 1, sizeof back - 1, f), 7u) << "the descriptor's file got the bytes";
  EXPECT_STREQ(back, "through");
  std::fclose(f);
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  const ScratchDir shm("/dev/shm", "refit_text_file");
  const auto under_dev = shm.path() / "plan.json";
  ASSERT_TRUE(write_file(under_dev, [](std::ostream& s) { s << "old"; }));
  {
    auto out = OutputFile::open(under_dev);
    ASSERT_TRUE(out) << out.error().message;
    out->stream() << "new";
  }  // given up: never committed
  EXPECT_EQ(read_text_file(under_dev).value(), "old") << "written in place, it would be truncated";
  EXPECT_EQ(files_in(shm.path()), std::vector<std::string>{"plan.json"});
}

TEST(TextFile, AWriterKilledBeforeItCommitsLeavesNothingBeside) {
  // The tenth campaign's H9: the output is opened before the work, so a Ctrl-C, a timeout or an
  // out-of-memory kill during a long plan left its named temporary behind, a new one each run.
  // Written to a file of no name, nothing is left whatever kills the writer.
  const ScratchDir dir(std::filesystem::temp_directory_path(), "refit_killed");
  if (const int probe = ::open(dir.path().c_str(), O_TMPFILE | O_WRONLY, 0600); probe >= 0)
    ::close(probe);
  else
    GTEST_SKIP() << "this file system has no unnamed files (O_TMPFILE): a killed writer leaves its temporary";
  const auto path = dir.path() / "plan.json";
  ASSERT_TRUE(write_file(path, [](std::ostream& s) { s << "old"; }));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto out = OutputFile::open(path);
    if (out) out->stream() << "new" << std::flush;
    ::raise(SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(files_in(dir.path()), std::vector<std::string>{"plan.json"});
  EXPECT_EQ(read_text_file(path).value(), "old");
}

TEST(TextFile, TheTemporaryIsPrivateWhenTheFileIsAndFitsALongName) {
  // The tenth campaign's H9 and H10: the temporary of a 0600 file was created 0644 and made
  // private only when put in place; and `.<name>.refit-<pid>-<n>` of a valid 250-byte name
  // exceeded the 255 bytes of a file name.
  const ScratchDir dir(std::filesystem::temp_directory_path(), "refit_private");
  const auto path = dir.path() / "secret.json";
  ASSERT_TRUE(write_file(path, [](std::ostream& s) { s << "old"; }));
  std::filesystem::permissions(path,
                               std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  {
    auto out = OutputFile::open(path);
    ASSERT_TRUE(out) << out.error().message;
    for (const auto& name : files_in(dir.path())) {
      if (name == "secret.json") continue;
      EXPECT_EQ(std::filesystem::status(dir.path() / name).permissions(),
                std::filesystem::perms::owner_read | std::filesystem::perms::owner_write)
          << name << ": others could read the new contents";
    }
  }
  const auto long_name = dir.path() / std::string(250, 'p');
  ASSERT_TRUE(write_file(long_name, [](std::ostream& s) { s << "long"; }));
  EXPECT_EQ(read_text_file(long_name).value(), "long");
  const auto dash = OutputFile::open("-");
  ASSERT_FALSE(dash);
  EXPECT_NE(dash.error().message.find("standard output is /dev/stdout here"), std::string::npos)
      << dash.error().message;
}

}  // namespace
}  // namespace refit
