#pragma once
// Starts the real tinyllama binary as a child process that the test can
// signal while it runs (run_binary.h only waits for it): stdout and stderr go
// to files the test polls.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "run_binary.h"

namespace tinyllama::testing {

class Spawned {
 public:
  Spawned(const std::vector<std::string>& args, const std::filesystem::path& dir)
      : out_(dir / "out"), err_(dir / "err") {
    pid_ = ::fork();
    if (pid_ == 0) {
      if (!std::freopen(out_.c_str(), "w", stdout) || !std::freopen(err_.c_str(), "w", stderr)) {
        ::_exit(127);
      }
      std::vector<char*> argv;
      std::string binary = TINYLLAMA_BINARY;
      argv.push_back(binary.data());
      std::vector<std::string> copy = args;
      for (std::string& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      ::_exit(127);
    }
  }
  ~Spawned() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  Spawned(const Spawned&) = delete;
  Spawned& operator=(const Spawned&) = delete;

  // Waits until stdout holds `text` (true) or the child exits or `limit` passes (false).
  bool wait_for_output(const std::string& text,
                       std::chrono::seconds limit = std::chrono::seconds(60)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (read_text(out_).find(text) != std::string::npos) return true;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        status_ = status;
        return read_text(out_).find(text) != std::string::npos;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
  void signal(int sig) const { ::kill(pid_, sig); }
  // The exit code (128 + signal if it was killed by one); -1 after `limit`.
  int wait(std::chrono::seconds limit = std::chrono::seconds(60)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!reaped_ && std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        reaped_ = true;
        status_ = status;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!reaped_) return -1;
    if (WIFEXITED(status_)) return WEXITSTATUS(status_);
    return WIFSIGNALED(status_) ? 128 + WTERMSIG(status_) : -1;
  }
  bool exited_by_signal() const { return reaped_ && WIFSIGNALED(status_); }
  std::string out() const { return read_text(out_); }
  std::string err() const { return read_text(err_); }

 private:
  std::filesystem::path out_;
  std::filesystem::path err_;
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

}  // namespace tinyllama::testing
