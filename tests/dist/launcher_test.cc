#include "dist/launcher.h"

#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <thread>

#include "core/errors.h"

namespace tinyllama::dist {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

LaunchSpec fake(int world, std::vector<std::string> args) {
  LaunchSpec spec;
  spec.world = world;
  spec.args = std::move(args);
  spec.executable = TINYLLAMA_FAKE_RANK;
  spec.stop_grace = milliseconds(300);
  return spec;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tinyllama_launch_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Sends `signals` to this process (the launcher) once all `world` ranks wrote their ready file.
  std::thread signal_when_ready(int world, const std::vector<int>& signals) {
    return std::thread([this, world, signals] {
      const auto give_up = Clock::now() + std::chrono::seconds(20);
      for (int r = 0; r < world && Clock::now() < give_up; ++r) {
        while (!fs::exists(dir_ / ("ready" + std::to_string(r))) && Clock::now() < give_up) {
          std::this_thread::sleep_for(milliseconds(10));
        }
      }
      for (int sig : signals) {
        ::kill(::getpid(), sig);
        std::this_thread::sleep_for(milliseconds(200));
      }
    });
  }

  fs::path dir_;
};

TEST_F(LauncherTest, AllRanksExitZero) {
  EXPECT_EQ(launch_local_ranks(fake(3, {"exit", "0"})), 0);
}

TEST_F(LauncherTest, RanksGetTheirVariablesAndTheTemporaryDirectoryGoes) {
  ::setenv("TINYLLAMA_FAKE_RANK_INHERITED", "1", 1);
  ::setenv("NCCL_NVLS_ENABLE", "1", 1);  // the launcher overrides it
  const int code = launch_local_ranks(fake(4, {"check-env", "4", dir_.string()}));
  ::unsetenv("TINYLLAMA_FAKE_RANK_INHERITED");
  ::unsetenv("NCCL_NVLS_ENABLE");
  ASSERT_EQ(code, 0);
  std::set<std::string> files;
  for (int r = 0; r < 4; ++r) {
    std::ifstream in(dir_ / ("rank" + std::to_string(r)));
    std::string path;
    std::getline(in, path);
    ASSERT_FALSE(path.empty()) << "rank " << r;
    files.insert(path);
  }
  ASSERT_EQ(files.size(), 1u);  // one rendezvous file for all ranks
  EXPECT_FALSE(fs::exists(fs::path(*files.begin()).parent_path()));
}

TEST_F(LauncherTest, RanksMeetThroughTheRendezvousFile) {
  EXPECT_EQ(launch_local_ranks(fake(3, {"rendezvous"})), 0);
}

TEST_F(LauncherTest, AllInterruptedReturnsTheirCode) {
  EXPECT_EQ(launch_local_ranks(fake(3, {"exit", "130"})), 130);
  EXPECT_EQ(launch_local_ranks(fake(2, {"exit", "143"})), 143);
}

TEST_F(LauncherTest, OneFailureStopsTheOthers) {
  // Rank 1 exits 3; ranks 0 and 3 die of our SIGTERM; rank 2 ignores it and needs SIGKILL.
  testing::internal::CaptureStderr();
  const auto start = Clock::now();
  const int code = launch_local_ranks(fake(4, {"fail", "1", "3", "2"}));
  const auto took = Clock::now() - start;
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1);
  EXPECT_EQ(count(err, "rank 1 exited with code 3\n"), 1) << err;
  EXPECT_EQ(count(err, "stopping the other ranks\n"), 1) << err;
  EXPECT_EQ(count(err, "killed by signal"), 0) << err;  // the ranks we stopped are no failures
  EXPECT_GE(took, milliseconds(200 + 300));             // rank 1's delay, then the grace period
  EXPECT_LT(took, milliseconds(5000));
}

TEST_F(LauncherTest, RankKilledBySignalIsReported) {
  testing::internal::CaptureStderr();
  const int code = launch_local_ranks(fake(3, {"kill-self", "1", "9"}));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1);
  EXPECT_EQ(count(err, "rank 1 was killed by signal 9 (Killed)\n"), 1) << err;
  EXPECT_EQ(count(err, "stopping the other ranks\n"), 1) << err;
}

// A rank stopped (SIGSTOP) while the others run would hold them in their
// collectives forever: after the limit it is named and killed, the others
// stopped, and the job fails.
TEST_F(LauncherTest, AStoppedRankFailsTheJobAfterTheLimit) {
  LaunchSpec spec = fake(3, {"kill-self", "1", std::to_string(SIGSTOP)});
  spec.stopped_limit = milliseconds(500);
  testing::internal::CaptureStderr();
  const auto start = Clock::now();
  const int code = launch_local_ranks(spec);
  const auto took = Clock::now() - start;
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 1);
  EXPECT_EQ(count(err, "rank 1 was stopped by signal " + std::to_string(SIGSTOP)), 1) << err;
  EXPECT_EQ(count(err, "stopping the other ranks\n"), 1) << err;
  EXPECT_EQ(count(err, "killed by signal"), 0) << err;  // the ranks we stopped are no failures
  EXPECT_GE(took, milliseconds(200 + 500));
  EXPECT_LT(took, milliseconds(5000));
}

TEST_F(LauncherTest, ExecFailureNamesTheRank) {
  LaunchSpec spec = fake(2, {"exit", "0"});
  spec.executable = (dir_ / "no-such-binary").string();
  try {
    launch_local_ranks(spec);
    FAIL() << "no RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 0 could not start"), std::string::npos) << what;
    EXPECT_NE(what.find("No such file or directory"), std::string::npos) << what;
  }
}

TEST_F(LauncherTest, ZeroRanksIsAUsageError) {
  EXPECT_THROW(launch_local_ranks(fake(0, {"exit", "0"})), UsageError);
}

TEST_F(LauncherTest, SigtermToTheLauncherReachesTheRanks) {
  struct sigaction before {};
  ::sigaction(SIGTERM, nullptr, &before);
  std::thread sender = signal_when_ready(3, {SIGTERM});
  const int code = launch_local_ranks(fake(3, {"wait-term", dir_.string()}));
  sender.join();
  EXPECT_EQ(code, 143);
  struct sigaction after {};
  ::sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);  // the disposition is back
}

// A SIGINT sent to the launcher alone (kill -INT, a scheduler, a Python parent) reaches every
// rank once, and they end as their own interrupt would: 130. (A terminal's Ctrl-C reaches the
// ranks itself, and the launcher only notes it: that one is not passed on a second time.)
TEST_F(LauncherTest, SigintSentToTheLauncherReachesTheRanksOnce) {
  testing::internal::CaptureStderr();
  std::thread sender = signal_when_ready(3, {SIGINT});
  const int code = launch_local_ranks(fake(3, {"wait-int", dir_.string()}));
  sender.join();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 130);
  EXPECT_EQ(count(err, "rank "), 0) << err;
}

TEST_F(LauncherTest, SecondSignalKillsRanksThatIgnoreTheFirst) {
  // The first SIGTERM is passed on and the ranks ignore it; the second one passes on SIGKILL.
  // No rank failed on its own, and the launcher returns the interrupt's code.
  testing::internal::CaptureStderr();
  std::thread sender = signal_when_ready(2, {SIGTERM, SIGTERM});
  const int code = launch_local_ranks(fake(2, {"wait-term", dir_.string(), "ignore"}));
  sender.join();
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 143);
  EXPECT_EQ(count(err, "rank "), 0) << err;
}

}  // namespace
}  // namespace tinyllama::dist
