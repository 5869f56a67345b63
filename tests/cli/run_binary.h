#pragma once
// Runs the real tinyllama binary (built alongside the tests) with a command
// line and captures its exit code, stdout and stderr, so the tests see what
// a user sees.
#include <unistd.h>

#include <sys/wait.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace tinyllama::testing {

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh directory per call under the system temp dir.
inline std::filesystem::path scratch_dir(const std::string& tag) {
  auto dir = std::filesystem::temp_directory_path() /
             ("tinyllama_test_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// args is appended verbatim to the binary's path (the tests pass only
// simple, unquoted tokens).
inline RunResult run_tinyllama(const std::string& args) {
  const auto dir = scratch_dir("run");
  const std::string cmd = std::string(TINYLLAMA_BINARY) + " " + args + " >" +
                          (dir / "out").string() + " 2>" + (dir / "err").string();
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_text(dir / "out");
  r.err = read_text(dir / "err");
  std::filesystem::remove_all(dir);
  return r;
}

}  // namespace tinyllama::testing
