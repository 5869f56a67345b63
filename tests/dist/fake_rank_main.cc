// A stand-in for a tinyllama rank, started by dist/launcher_test.cc through launch_local_ranks.
// What it does is chosen by its arguments:
//   exit CODE                     every rank exits CODE
//   check-env WORLD DIR           checks the launcher's variables, writes TINYLLAMA_RENDEZVOUS_FILE
//                                 to DIR/rankN; exits 0, or 10+ with the reason on stderr
//   fail RANK CODE [STUBBORN]     RANK exits CODE after 200 ms; the others sleep until killed,
//                                 STUBBORN ignoring SIGTERM
//   kill-self RANK SIGNAL         RANK raises SIGNAL after 200 ms; the others sleep until killed
//   wait-term DIR [ignore]        exits 143 on SIGTERM (or ignores it); DIR/readyN says it is set
//   wait-int DIR                  exits 130 on SIGINT, as a rank's orderly interrupt does
//   rendezvous                    shares a blob from rank 0 through rank_env + share_from_rank0
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dist/rank_env.h"
#include "dist/rendezvous.h"

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? -1 : std::atoi(v);
}

[[noreturn]] void sleep_forever() {
  for (;;) ::pause();
}

int fail(const char* why, int code) {
  std::fprintf(stderr, "fake rank %d: %s\n", env_int("RANK"), why);
  return code;
}

int check_env(int world, const std::string& dir) {
  const int rank = env_int("RANK");
  if (rank < 0 || rank >= world) return fail("RANK is missing or out of range", 10);
  if (env_int("WORLD_SIZE") != world) return fail("WORLD_SIZE is wrong", 11);
  if (env_int("LOCAL_RANK") != rank) return fail("LOCAL_RANK differs from RANK", 12);
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  if (nvls == nullptr || std::strcmp(nvls, "0") != 0) return fail("NCCL_NVLS_ENABLE is not 0", 13);
  const char* file = std::getenv("TINYLLAMA_RENDEZVOUS_FILE");
  if (file == nullptr || *file == '\0') return fail("TINYLLAMA_RENDEZVOUS_FILE is unset", 14);
  const std::string path(file);
  struct stat st {};
  const auto slash = path.rfind('/');
  if (slash == std::string::npos || ::stat(path.substr(0, slash).c_str(), &st) != 0 ||
      !S_ISDIR(st.st_mode)) {
    return fail("the rendezvous file's directory does not exist", 15);
  }
  if (env_int("TINYLLAMA_LAUNCHER_PID") != static_cast<int>(::getppid())) {
    return fail("TINYLLAMA_LAUNCHER_PID is not the launcher's pid", 17);
  }
  if (std::getenv("TINYLLAMA_FAKE_RANK_INHERITED") == nullptr) {
    return fail("the launcher's own environment was not passed on", 16);
  }
  std::ofstream(dir + "/rank" + std::to_string(rank)) << path;
  return 0;
}

extern "C" void exit_143(int) {
  ::_exit(143);
}

extern "C" void exit_130(int) {
  ::_exit(130);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const std::string mode = args.empty() ? "" : args[0];
  const int rank = env_int("RANK");
  if (mode == "exit" && args.size() == 2) return std::atoi(args[1].c_str());
  if (mode == "check-env" && args.size() == 3)
    return check_env(std::atoi(args[1].c_str()), args[2]);
  if ((mode == "fail" || mode == "kill-self") && args.size() >= 3) {
    if (args.size() == 4 && rank == std::atoi(args[3].c_str())) ::signal(SIGTERM, SIG_IGN);
    if (rank != std::atoi(args[1].c_str())) sleep_forever();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the others get going
    if (mode == "fail") return std::atoi(args[2].c_str());
    ::raise(std::atoi(args[2].c_str()));
    return 99;
  }
  if (mode == "wait-int" && args.size() >= 2) {
    ::signal(SIGINT, exit_130);
    std::ofstream(args[1] + "/ready" + std::to_string(rank)) << "ready";
    sleep_forever();
  }
  if (mode == "wait-term" && args.size() >= 2) {
    ::signal(SIGTERM, args.size() == 3 && args[2] == "ignore" ? SIG_IGN : exit_143);
    std::ofstream(args[1] + "/ready" + std::to_string(rank)) << "ready";
    sleep_forever();
  }
  if (mode == "rendezvous") {
    const auto env = tinyllama::dist::rank_env();
    if (!env) return fail("rank_env() found no WORLD_SIZE", 20);
    // Every rank knows what rank 0 will send (the launcher's pid), but only rank 0 passes it in.
    std::vector<std::uint8_t> expected(128);
    for (std::size_t i = 0; i < expected.size(); ++i) {
      expected[i] = static_cast<std::uint8_t>(i * 31 + static_cast<unsigned>(::getppid()));
    }
    const auto got = tinyllama::dist::share_from_rank0(
        *env, env->rank == 0 ? expected : std::vector<std::uint8_t>{}, std::chrono::seconds(20));
    return got == expected ? 0 : fail("received a different blob", 21);
  }
  std::fprintf(stderr, "fake rank: unknown arguments\n");
  return 98;
}
