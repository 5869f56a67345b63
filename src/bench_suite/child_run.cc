#include "bench_suite/child_run.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/errors.h"

extern char** environ;

namespace tinyllama::suite {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// waitpid with WNOHANG until the child exits or `until` passes.
bool wait_until(pid_t pid, int& status, std::chrono::steady_clock::time_point until, bool limited) {
  while (true) {
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) return true;
    if (got < 0 && errno != EINTR) return true;
    if (limited && std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

std::string last_error_line(const std::string& text) {
  std::istringstream in(text);
  std::string last_error, last_line;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("error: ", 0) == 0) last_error = line.substr(7);
    if (line.find_first_not_of(" \t\r") != std::string::npos) last_line = line;
  }
  return last_error.empty() ? last_line : last_error;
}

std::string last_nonblank_line(const std::string& text) {
  const std::size_t end = text.find_last_not_of("\n ");
  if (end == std::string::npos) return "";
  const std::size_t begin = text.rfind('\n', end);
  const std::size_t from = begin == std::string::npos ? 0 : begin + 1;
  return text.substr(from, end + 1 - from);
}

ChildResult run_child(const std::string& program, const std::vector<std::string>& args,
                      const std::string& out_path, const std::string& err_path, double timeout_s) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<std::string> copy;
  copy.push_back(program);
  copy.insert(copy.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(copy.size() + 1);
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    throw RuntimeFailure("cannot start " + program + ": " + std::strerror(rc));
  }
  ChildResult result;
  int status = 0;
  const auto start = std::chrono::steady_clock::now();
  const bool limited = timeout_s > 0;
  const auto until = start + std::chrono::milliseconds(static_cast<long long>(timeout_s * 1e3));
  if (!wait_until(pid, status, until, limited)) {
    result.timed_out = true;
    ::kill(pid, SIGTERM);
    if (!wait_until(pid, status, std::chrono::steady_clock::now() + std::chrono::seconds(10),
                    true)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  // posix_spawnp reports a program missing from PATH as exit code 127.
  const std::string err_text = read_all(err_path);
  result.error_line = last_error_line(err_text);
  result.last_line = last_nonblank_line(err_text);
  if (result.timed_out) {
    result.error_line = "timed out after " + std::to_string(static_cast<int>(timeout_s)) + " s";
  } else if (result.exit_code == 127 && result.error_line.empty()) {
    result.error_line = program + ": not found";
  }
  return result;
}

}  // namespace tinyllama::suite
