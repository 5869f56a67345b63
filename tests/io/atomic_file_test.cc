#include "io/atomic_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/errors.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tinyllama_af_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  std::size_t entries() const {
    return static_cast<std::size_t>(
        std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }
  fs::path dir_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text) {
  write_atomically("--out", path, [&](FileSink& out) { out.write(text); });
}

TEST_F(AtomicFileTest, WritesAndReplacesKeepingTheModeAndNoTemporary) {
  const std::string path = file("a.json");
  write_text(path, "first");
  EXPECT_EQ(slurp(path), "first");
  fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  write_text(path, "second, longer");
  EXPECT_EQ(slurp(path), "second, longer");
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, FollowsASymlinkAndKeepsIt) {
  write_text(file("target"), "old");
  fs::create_symlink(file("target"), file("link"));
  write_text(file("link"), "new");
  EXPECT_TRUE(fs::is_symlink(file("link")));
  EXPECT_EQ(slurp(file("target")), "new");
  EXPECT_EQ(entries(), 2u);
}

TEST_F(AtomicFileTest, WritesThroughDevNullAndAFifo) {
  write_text("/dev/null", "discarded");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));

  const std::string fifo = file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = slurp(fifo); });
  write_text(fifo, "through the pipe");
  reader.join();
  EXPECT_EQ(received, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(written_in_place(fifo));
  EXPECT_TRUE(written_in_place("/dev/stdout"));
  EXPECT_FALSE(written_in_place(file("plain")));
}

TEST_F(AtomicFileTest, RefusesWhatItMustNotReplace) {
  fs::create_directories(file("d"));
  EXPECT_THROW(write_text(file("d"), "x"), RuntimeFailure);
  fs::create_symlink(file("nowhere"), file("dangling"));
  EXPECT_THROW(write_text(file("dangling"), "x"), RuntimeFailure);
  EXPECT_FALSE(fs::exists(file("nowhere")));
  EXPECT_TRUE(fs::is_directory(file("d")));
}

TEST_F(AtomicFileTest, AFailedFillLeavesNothingAndKeepsTheOldFile) {
  const std::string path = file("w.bin");
  write_text(path, "complete");
  EXPECT_THROW(write_atomically("--out", path,
                                [](FileSink& out) {
                                  out.write("partial");
                                  throw RuntimeFailure("disk full");
                                }),
               RuntimeFailure);
  EXPECT_EQ(slurp(path), "complete");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, ALegalLongNameWorks) {
  const std::string name(253, 'n');
  write_text(file(name), "long");
  EXPECT_EQ(slurp(file(name)), "long");
  EXPECT_NO_THROW(check_output_path("--json", file(name)));
}

TEST_F(AtomicFileTest, ConcurrentWritersNeverMix) {
  const std::string path = file("shared.bin");
  const std::string a(1 << 16, 'a');
  const std::string b(1 << 16, 'b');
  auto writer = [&](const std::string& text) {
    for (int i = 0; i < 20; ++i) write_text(path, text);
  };
  std::thread ta(writer, a);
  std::thread tb(writer, b);
  ta.join();
  tb.join();
  const std::string got = slurp(path);
  EXPECT_TRUE(got == a || got == b) << "a mix of two writers";
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, PendingTemporaryIsRemovedForASignalHandler) {
  const std::string path = file("p.bin");
  EXPECT_THROW(write_atomically("--out", path,
                                [&](FileSink& out) {
                                  out.write("half");
                                  EXPECT_EQ(entries(), 1u);  // the temporary
                                  remove_pending_temporary();
                                  EXPECT_EQ(entries(), 0u);
                                }),
               RuntimeFailure);  // nothing left to rename
  EXPECT_EQ(entries(), 0u);
}

std::string usage_error(const std::string& path) {
  try {
    check_output_path("--json", path);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST_F(AtomicFileTest, ChecksBeforeTheRunNameTheFlagAndTheProblem) {
  EXPECT_EQ(usage_error(""), "");
  EXPECT_EQ(usage_error(file("new.json")), "");
  EXPECT_EQ(usage_error("/dev/null"), "");
  EXPECT_NE(usage_error(file("missing/r.json"))
                .find("--json " + file("missing/r.json") + ": directory " + file("missing") +
                      " does not exist"),
            std::string::npos);
  fs::create_directories(file("d"));
  EXPECT_NE(usage_error(file("d")).find("is a directory"), std::string::npos);
  write_text(file("f"), "");
  EXPECT_NE(usage_error(file("f/r.json")).find("is not a directory"), std::string::npos);
  // Not writable even for root: /proc/self takes no new files.
  EXPECT_NE(usage_error("/proc/self/r.json").find("cannot create a file in directory /proc/self"),
            std::string::npos);
  EXPECT_NE(usage_error(file(std::string(256, 'n'))).find("256 bytes long"), std::string::npos);
  EXPECT_EQ(entries(), 2u) << "the probe file is gone";
}

TEST_F(AtomicFileTest, SameOutputFileSeesThroughSpellingsAndLinks) {
  write_text(file("a"), "");
  fs::create_symlink(file("a"), file("l"));
  EXPECT_TRUE(same_output_file(file("a"), (dir_ / "." / "a").string()));
  EXPECT_TRUE(same_output_file(file("a"), file("l")));
  EXPECT_TRUE(same_output_file(file("new"), file("new")));
  EXPECT_FALSE(same_output_file(file("a"), file("b")));
  EXPECT_FALSE(same_output_file("/dev/null", "/dev/null"));
}

}  // namespace
}  // namespace tinyllama
