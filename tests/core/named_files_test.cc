// Names from inputs never become paths (core/named_files.h): the encoding keeps ordinary
// parameter names as they are, turns everything else into %XX so that no name leaves its folder
// or names the folder itself, and is reversible; the folder opens no link and overwrites nothing
// unless asked.
#include "refit/core/named_files.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace refit {
namespace {

namespace fs = std::filesystem;

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> out;
  for (char c : s) out.push_back(static_cast<std::byte>(c));
  return out;
}

std::string contents(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

class TempFolder {
 public:
  TempFolder() {
    std::string tmpl = (fs::temp_directory_path() / "refit-named-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempFolder() { fs::remove_all(path_); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(FileNames, OrdinaryParameterNamesAreTheirOwnFileNames) {
  for (const std::string name : {"decoder.layers.0.self_attention.linear_qkv.weight",
                                 "model.layers.3.mlp.experts.w13_weight", "lm_head.weight", "a-b_c.9"})
    EXPECT_EQ(encode_file_name(name).value(), name);
}

TEST(FileNames, NamesThatWouldLeaveTheFolderOrNameItAreEncoded) {
  // '/' is %2F, a leading '.' is %2E: no separator survives, and '.' and '..' cannot be made.
  EXPECT_EQ(encode_file_name("../../etc/passwd").value(), "%2E.%2F..%2Fetc%2Fpasswd");
  EXPECT_EQ(encode_file_name("/etc/passwd").value(), "%2Fetc%2Fpasswd");
  EXPECT_EQ(encode_file_name("..").value(), "%2E.");
  EXPECT_EQ(encode_file_name(".").value(), "%2E");
  EXPECT_EQ(encode_file_name("a b%\n\xff").value(), "a%20b%25%0A%FF");
  EXPECT_EQ(encode_file_name("").error().code, ErrorCode::kInvalidArgument);
  // 128 spaces encode to 384 bytes, past the 255 a file name may have.
  EXPECT_EQ(encode_file_name(std::string(128, ' ')).error().code, ErrorCode::kOutOfRange);
}

TEST(FileNames, TheEncodingIsReversibleAndEveryFileNameHasOneName) {
  // Property: random byte strings round-trip, and what they encode to holds no '/' and is never
  // '.' or '..'; decoding refuses spellings the encoder never makes.
  std::mt19937 rng(29);
  for (int i = 0; i < 2000; ++i) {
    std::string name(1 + rng() % 40, '\0');
    for (auto& c : name) c = static_cast<char>(rng() % 256);
    const auto file = encode_file_name(name);
    if (!file) continue;  // longer than a file name
    EXPECT_EQ(file->find('/'), std::string::npos);
    EXPECT_NE(*file, ".");
    EXPECT_NE(*file, "..");
    EXPECT_EQ(decode_file_name(*file).value(), name);
  }
  for (const std::string bad : {"%41", "%2f", "%2", "a/b", ".hidden", "%", ""})
    EXPECT_FALSE(decode_file_name(bad)) << bad;
}

TEST(NamedFolder, WritesAndReadsInsideTheFolderOnly) {
  TempFolder tmp;
  const auto folder = NamedFileFolder::open(tmp.path(), "rank3", /*create=*/true).value();
  const auto data = bytes_of("abcd");
  ASSERT_TRUE(folder.write("../../escaped", data, Overwrite::kRefuse));
  EXPECT_FALSE(fs::exists(tmp.path().parent_path() / "escaped"));
  EXPECT_EQ(contents(tmp.path() / "rank3" / "%2E.%2F..%2Fescaped"), "abcd");
  std::vector<std::byte> back(4);
  ASSERT_TRUE(folder.read("../../escaped", back));
  EXPECT_EQ(back, data);
}

TEST(NamedFolder, AFileThatExistsIsRefusedUnlessAskedAndThenOnlyAPlainOne) {
  TempFolder tmp;
  const auto folder = NamedFileFolder::open(tmp.path(), "rank0", true).value();
  ASSERT_TRUE(folder.write("w", bytes_of("1"), Overwrite::kRefuse));
  const auto again = folder.write("w", bytes_of("22"), Overwrite::kRefuse);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(again.error().message.find("already exists"), std::string::npos) << again.error().message;
  const auto owner_only = fs::perms::owner_read | fs::perms::owner_write;
  fs::permissions(tmp.path() / "rank0" / "w", owner_only);
  ASSERT_TRUE(folder.write("w", bytes_of("22"), Overwrite::kAllow));
  EXPECT_EQ(contents(tmp.path() / "rank0" / "w"), "22");
  EXPECT_EQ(fs::status(tmp.path() / "rank0" / "w").permissions(), owner_only) << "replaced, it stays private";
  // A hard link to a file outside: overwriting it would write there.
  const auto outside = tmp.path() / "outside";
  std::ofstream(outside) << "keep";
  fs::create_hard_link(outside, tmp.path() / "rank0" / "linked");
  EXPECT_FALSE(folder.write("linked", bytes_of("x"), Overwrite::kAllow));
  EXPECT_EQ(contents(outside), "keep");
}

TEST(NamedFolder, NoSymbolicLinkIsFollowedBelowTheFolder) {
  TempFolder tmp;
  const auto outside = tmp.path() / "outside";
  fs::create_directory(outside);
  std::ofstream(outside / "secret") << "sec";
  // A rank folder that is a link out of the folder.
  fs::create_directory_symlink(outside, tmp.path() / "rank1");
  const auto linked = NamedFileFolder::open(tmp.path(), "rank1", true);
  ASSERT_FALSE(linked);
  EXPECT_EQ(linked.error().code, ErrorCode::kInvalidArgument);
  // A file that is a link out of the folder, read and written.
  const auto folder = NamedFileFolder::open(tmp.path(), "rank2", true).value();
  fs::create_symlink(outside / "secret", tmp.path() / "rank2" / "w");
  std::vector<std::byte> three(3);
  EXPECT_EQ(folder.read("w", three).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(folder.write("w", bytes_of("xyz"), Overwrite::kAllow).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(folder.write("w", bytes_of("xyz"), Overwrite::kRefuse).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(contents(outside / "secret"), "sec");
}

TEST(NamedFolder, ReadsNameTheFileThatIsMissingOrOfTheWrongSize) {
  TempFolder tmp;
  EXPECT_EQ(NamedFileFolder::open(tmp.path(), "rank0", false).error().code, ErrorCode::kNotFound);
  const auto folder = NamedFileFolder::open(tmp.path(), "rank0", true).value();
  std::vector<std::byte> four(4);
  const auto missing = folder.read("w", four);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("rank0/w: missing"), std::string::npos) << missing.error().message;
  ASSERT_TRUE(folder.write("w", bytes_of("abc"), Overwrite::kRefuse));
  const auto short_file = folder.read("w", four);
  EXPECT_EQ(short_file.error().code, ErrorCode::kMismatch);
  EXPECT_NE(short_file.error().message.find("3 bytes, expected 4"), std::string::npos);
}

TEST(NamedFolder, OnlyRegularFilesAreWritten) {
  // /dev/full opens for writing like a file; the folder refuses it, naming it, before a write.
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const auto dev = NamedFileFolder::open("/", "dev", false).value();
  const auto r = dev.write("full", bytes_of("x"), Overwrite::kAllow);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("/dev/full"), std::string::npos) << r.error().message;
}

// A FIFO with nobody at its other end would block an open until somebody came: it is refused at
// once, named, when read and when written (with or without overwriting).
TEST(NamedFolder, AFifoIsRefusedWithoutWaitingForItsOtherEnd) {
  TempFolder tmp;
  const auto folder = NamedFileFolder::open(tmp.path(), "rank0", true).value();
  const auto fifo = tmp.path() / "rank0" / "w";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::vector<std::byte> out(1);
  const auto read = folder.read("w", out);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(read.error().message.find(fifo.string() + ": not a regular file"), std::string::npos)
      << read.error().message;
  for (const auto overwrite : {Overwrite::kAllow, Overwrite::kRefuse}) {
    const auto written = folder.write("w", bytes_of("x"), overwrite);
    ASSERT_FALSE(written);
    EXPECT_EQ(written.error().code, ErrorCode::kInvalidArgument) << written.error().message;
    EXPECT_NE(written.error().message.find(fifo.string()), std::string::npos) << written.error().message;
  }
}

// While alive, no file this process writes may grow past `bytes` (RLIMIT_FSIZE): a write beyond
// fails (EFBIG) as one on a full disk does, with SIGXFSZ ignored.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) : old_signal_(std::signal(SIGXFSZ, SIG_IGN)) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    rlimit limit = old_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_signal_);
  }

 private:
  rlimit old_{};
  void (*old_signal_)(int);
};

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::ranges::sort(names);
  return names;
}

TEST(NamedFolder, AWriteThatFailsHalfWayLeavesTheFolderAsItWas) {
  // 8 bytes into files limited to 4: the write fails after 4. The old "w" stays whole, no new
  // "v" appears, and nothing else (no temporary) is left.
  TempFolder tmp;
  const auto folder = NamedFileFolder::open(tmp.path(), "rank0", true).value();
  ASSERT_TRUE(folder.write("w", bytes_of("old"), Overwrite::kRefuse));
  {
    const FileSizeLimit limit(4);
    for (const auto& [name, overwrite] :
         {std::pair{"w", Overwrite::kAllow}, std::pair{"v", Overwrite::kRefuse}}) {
      const auto r = folder.write(name, bytes_of("12345678"), overwrite);
      ASSERT_FALSE(r) << name;
      EXPECT_EQ(r.error().code, ErrorCode::kRuntime) << r.error().message;
      EXPECT_NE(r.error().message.find("rank0/" + std::string(name) + ": cannot be written"),
                std::string::npos)
          << r.error().message;
    }
  }
  EXPECT_EQ(contents(tmp.path() / "rank0" / "w"), "old");
  EXPECT_EQ(files_in(tmp.path() / "rank0"), std::vector<std::string>{"w"});
}

TEST(NamedFolder, ASetOfFilesIsReplacedWholeOrNotAtAll) {
  // The tenth campaign's H4: a step's files are one set to a loader. With files limited to 4
  // bytes, "c" (8 bytes) fails after "a" and "b" (3 bytes each) were written: once, "a" and "b"
  // were already new while "c" stayed old. Now every file is old and no temporary is left. A
  // name refused (kRefuse, "c" exists) is refused before any file is written.
  TempFolder tmp;
  const auto folder = NamedFileFolder::open(tmp.path(), "rank0", true).value();
  for (const char* name : {"a", "b", "c"})
    ASSERT_TRUE(folder.write(name, bytes_of("old"), Overwrite::kRefuse));
  const auto a = bytes_of("new"), b = bytes_of("new"), c = bytes_of("new bits");
  const NamedBytes step[] = {{.name = "a", .bytes = a}, {.name = "b", .bytes = b}, {.name = "c", .bytes = c}};
  {
    const FileSizeLimit limit(4);
    const auto r = folder.write_all(step, Overwrite::kAllow);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("rank0/c: cannot be written"), std::string::npos) << r.error().message;
  }
  for (const char* name : {"a", "b", "c"}) EXPECT_EQ(contents(tmp.path() / "rank0" / name), "old") << name;
  EXPECT_EQ(files_in(tmp.path() / "rank0"), (std::vector<std::string>{"a", "b", "c"}));
  const NamedBytes fresh[] = {{.name = "d", .bytes = a}, {.name = "c", .bytes = c}};
  const auto refused = folder.write_all(fresh, Overwrite::kRefuse);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("already exists"), std::string::npos) << refused.error().message;
  EXPECT_EQ(files_in(tmp.path() / "rank0"), (std::vector<std::string>{"a", "b", "c"})) << "no d written";
  ASSERT_TRUE(folder.write_all(step, Overwrite::kAllow));
  EXPECT_EQ(contents(tmp.path() / "rank0" / "c"), "new bits");
  EXPECT_EQ(files_in(tmp.path() / "rank0"), (std::vector<std::string>{"a", "b", "c"}));
}

}  // namespace
}  // namespace refit
