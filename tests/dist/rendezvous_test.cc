#include "dist/rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <thread>

#include "core/errors.h"

namespace tinyllama::dist {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using Blob = std::vector<std::uint8_t>;
using Clock = std::chrono::steady_clock;

Blob random_blob(std::size_t n = 128) {
  std::mt19937 rng(std::random_device{}());
  Blob out(n);
  for (auto& b : out) b = static_cast<std::uint8_t>(rng());
  return out;
}

// A port nothing listens on right now: bind port 0 on loopback and give it back.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

RankEnv tcp_env(int rank, int world, int port, const std::string& addr = "127.0.0.1") {
  RankEnv env;
  env.rank = rank;
  env.world = world;
  env.local_rank = rank;
  env.master_addr = addr;
  env.master_port = port;
  return env;
}

// Runs every rank on its own thread, rank 0 after `rank0_delay` (the others have to retry), and
// returns what each got; a rank's exception comes out of its future.
std::vector<std::future<Blob>> run_ranks(const std::vector<RankEnv>& envs, const Blob& blob,
                                         milliseconds rank0_delay, milliseconds timeout) {
  std::vector<std::future<Blob>> out;
  out.reserve(envs.size());
  for (const RankEnv& env : envs) {
    out.push_back(std::async(std::launch::async, [=] {
      if (env.rank == 0) std::this_thread::sleep_for(rank0_delay);
      return share_from_rank0(env, env.rank == 0 ? blob : Blob{}, timeout);
    }));
  }
  return out;
}

class RendezvousFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tinyllama_rdv_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  RankEnv env(int rank, int world) const {
    RankEnv e;
    e.rank = rank;
    e.world = world;
    e.rendezvous_file = (dir_ / "nccl_id").string();
    return e;
  }
  fs::path dir_;
};

TEST_F(RendezvousFileTest, ThreeRanksRankZeroLast) {
  const Blob blob = random_blob();
  auto got =
      run_ranks({env(0, 3), env(1, 3), env(2, 3)}, blob, milliseconds(150), milliseconds(5000));
  for (auto& f : got) EXPECT_EQ(f.get(), blob);
  // Only the file itself is left: the temporary was renamed onto it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(RendezvousFileTest, EmptyBlobTravelsToo) {
  auto got = run_ranks({env(0, 2), env(1, 2)}, {}, milliseconds(0), milliseconds(5000));
  for (auto& f : got) EXPECT_TRUE(f.get().empty());
}

TEST_F(RendezvousFileTest, WorldOfOneTouchesNothing) {
  RankEnv one = env(0, 1);
  one.rendezvous_file = (dir_ / "missing" / "nccl_id").string();
  const Blob blob = random_blob();
  EXPECT_EQ(share_from_rank0(one, blob, milliseconds(1)), blob);
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
}

TEST_F(RendezvousFileTest, TimesOutWhenRankZeroNeverComes) {
  const auto start = Clock::now();
  try {
    share_from_rank0(env(2, 3), {}, milliseconds(300));
    FAIL() << "no RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 2"), std::string::npos) << what;
    EXPECT_NE(what.find(env(2, 3).rendezvous_file), std::string::npos) << what;
  }
  const auto took = Clock::now() - start;
  EXPECT_GE(took, milliseconds(300));
  EXPECT_LT(took, milliseconds(3000));
}

TEST_F(RendezvousFileTest, ForeignFileIsRejectedAtOnce) {
  std::ofstream(dir_ / "nccl_id") << "this is not a rendezvous file at all";
  const auto start = Clock::now();
  try {
    share_from_rank0(env(1, 2), {}, milliseconds(5000));
    FAIL() << "no RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("is not rank 0's"), std::string::npos) << e.what();
  }
  EXPECT_LT(Clock::now() - start, milliseconds(2000));  // no waiting for the deadline
}

TEST_F(RendezvousFileTest, TruncatedFileIsDetected) {
  // A valid file written by rank 0 of another run, cut short.
  RankEnv writer = env(0, 2);
  writer.rendezvous_file = (dir_ / "whole").string();
  share_from_rank0(writer, random_blob(), milliseconds(100));
  fs::copy_file(dir_ / "whole", dir_ / "nccl_id");
  fs::resize_file(dir_ / "nccl_id", 16 + 100);
  EXPECT_THROW(share_from_rank0(env(1, 2), {}, milliseconds(300)), RuntimeFailure);
  // A longer length than the header announces, and a huge announced length, too.
  fs::copy_file(dir_ / "whole", dir_ / "nccl_id", fs::copy_options::overwrite_existing);
  std::ofstream(dir_ / "nccl_id", std::ios::app) << "x";
  EXPECT_THROW(share_from_rank0(env(1, 2), {}, milliseconds(300)), RuntimeFailure);
  {
    std::fstream f(dir_ / "nccl_id", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(15);
    f.put('\x7f');
  }
  EXPECT_THROW(share_from_rank0(env(1, 2), {}, milliseconds(300)), RuntimeFailure);
}

TEST_F(RendezvousFileTest, UnwritableDirectoryFailsRankZero) {
  RankEnv e = env(0, 2);
  e.rendezvous_file = (dir_ / "no" / "such" / "dir" / "nccl_id").string();
  try {
    share_from_rank0(e, random_blob(), milliseconds(300));
    FAIL() << "no RuntimeFailure";
  } catch (const RuntimeFailure& err) {
    EXPECT_NE(std::string(err.what()).find("rank 0"), std::string::npos) << err.what();
  }
}

TEST(RendezvousTcp, ThreeRanksRankZeroLast) {
  const int port = free_port();
  const Blob blob = random_blob();
  // Rank 2 finds rank 0 by name: getaddrinfo.
  auto got = run_ranks({tcp_env(0, 3, port), tcp_env(1, 3, port), tcp_env(2, 3, port, "localhost")},
                       blob, milliseconds(300), milliseconds(10000));
  for (auto& f : got) EXPECT_EQ(f.get(), blob);
}

TEST(RendezvousTcp, TorchElasticAgentStoreMovesToTheNextPort) {
  const int port = free_port();
  ::setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
  const Blob blob = random_blob();
  auto got = run_ranks({tcp_env(0, 2, port - 1), tcp_env(1, 2, port - 1)}, blob, milliseconds(50),
                       milliseconds(10000));
  std::vector<Blob> blobs;
  for (auto& f : got) {
    try {
      blobs.push_back(f.get());
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  }
  ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  for (const Blob& b : blobs) EXPECT_EQ(b, blob);
}

TEST(RendezvousTcp, StrayClientDoesNotTakeARanksPlace) {
  const int port = free_port();
  const Blob blob = random_blob();
  auto rank0 = std::async(std::launch::async, [&] {
    return share_from_rank0(tcp_env(0, 2, port), blob, milliseconds(10000));
  });
  // A client that connects and sends junk, before the real rank 1.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const auto give_up = Clock::now() + milliseconds(5000);
  while (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 &&
         Clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  const char junk[] = "GET / HTTP/1.0\r\n\r\n";
  ASSERT_GT(::send(fd, junk, sizeof junk, MSG_NOSIGNAL), 0);
  EXPECT_EQ(share_from_rank0(tcp_env(1, 2, port), {}, milliseconds(10000)), blob);
  EXPECT_EQ(rank0.get(), blob);
  ::close(fd);
}

TEST(RendezvousTcp, ClientTimesOutWhenRankZeroNeverComes) {
  const int port = free_port();
  const auto start = Clock::now();
  try {
    share_from_rank0(tcp_env(1, 2, port), {}, milliseconds(300));
    FAIL() << "no RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 1"), std::string::npos) << what;
    EXPECT_NE(what.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << what;
  }
  const auto took = Clock::now() - start;
  EXPECT_GE(took, milliseconds(300));
  EXPECT_LT(took, milliseconds(3000));
}

TEST(RendezvousTcp, RankZeroTimesOutNamingTheMissingRanks) {
  const int port = free_port();
  const Blob blob = random_blob();
  auto got = run_ranks({tcp_env(0, 3, port), tcp_env(2, 3, port)}, blob, milliseconds(0),
                       milliseconds(500));
  try {
    got[0].get();
    FAIL() << "no RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("rank(s) 1 did not"), std::string::npos) << e.what();
  }
  EXPECT_EQ(got[1].get(), blob);  // rank 2 came and was served
}

TEST(RendezvousTcp, ForeignServerIsRejected) {
  const int port = free_port();
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  std::thread server([&] {
    const int peer = ::accept(listener, nullptr, nullptr);
    const char banner[] = "SSH-2.0-OpenSSH_9.2 hello there\r\n";
    ::send(peer, banner, sizeof banner, MSG_NOSIGNAL);
    std::this_thread::sleep_for(milliseconds(200));
    ::close(peer);
  });
  try {
    share_from_rank0(tcp_env(1, 2, port), {}, milliseconds(5000));
    ADD_FAILURE() << "no RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("is not tinyllama's rank 0"), std::string::npos)
        << e.what();
  }
  server.join();
  ::close(listener);
}

TEST(RendezvousTcp, PortInUseFailsRankZero) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  try {
    share_from_rank0(tcp_env(0, 2, ntohs(addr.sin_port)), random_blob(), milliseconds(300));
    ADD_FAILURE() << "no RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("MASTER_PORT"), std::string::npos) << e.what();
  }
  ::close(listener);
}

TEST(Rendezvous, NoWayToMeetIsAUsageError) {
  RankEnv env;
  env.rank = 1;
  env.world = 2;
  EXPECT_THROW(share_from_rank0(env, {}, milliseconds(10)), UsageError);
  env.rank = 2;
  EXPECT_THROW(share_from_rank0(env, {}, milliseconds(10)), UsageError);
}

}  // namespace
}  // namespace tinyllama::dist
