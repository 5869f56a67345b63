#include "dist/signal_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "core/errors.h"

namespace tinyllama::dist {
namespace {

// The write end for the handler; a lock-free atomic int is safe to read in a handler.
std::atomic<int> g_write_fd{-1};

// A byte a signal: its number, plus kFromProcess when a process sent it
// (si_code <= 0: SI_USER, SI_QUEUE, SI_TKILL) rather than the kernel (a
// terminal's Ctrl-C is SI_KERNEL).
constexpr unsigned char kFromProcess = 0x80;

extern "C" void on_signal(int sig, siginfo_t* info, void* /*context*/) {
  const int saved = errno;
  const int fd = g_write_fd.load();
  if (fd >= 0) {
    const bool from_process = info != nullptr && info->si_code <= 0;
    const auto byte = static_cast<unsigned char>(sig | (from_process ? kFromProcess : 0));
    // A full pipe drops the byte: the loop wakes on the bytes already there and re-checks anyway.
    [[maybe_unused]] const ssize_t n = ::write(fd, &byte, 1);
  }
  errno = saved;
}

}  // namespace

SignalPipe::SignalPipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw RuntimeFailure(std::string("cannot create the launcher's signal pipe (") +
                         std::strerror(errno) + "); check the process's open-file limit");
  }
  read_.reset(fds[0]);
  write_.reset(fds[1]);
  int expected = -1;
  if (!g_write_fd.compare_exchange_strong(expected, fds[1])) {
    throw RuntimeFailure("a launcher of ranks is already running in this process");
  }
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  sigemptyset(&sa.sa_mask);
  // SA_RESTART: other threads' reads and writes carry on; SA_NOCLDSTOP: a stopped rank is no news
  // (the wait loop polls for stops); SA_SIGINFO: who sent it.
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP | SA_SIGINFO;
  for (std::size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &sa, &previous_[i]);
}

SignalPipe::~SignalPipe() {
  for (std::size_t i = 0; i < kSignals.size(); ++i)
    ::sigaction(kSignals[i], &previous_[i], nullptr);
  g_write_fd.store(-1);
}

std::vector<SignalPipe::Received> SignalPipe::drain() {
  std::vector<Received> out;
  unsigned char buffer[64];
  for (;;) {
    const ssize_t n = ::read(read_.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;  // EAGAIN: empty
    for (ssize_t i = 0; i < n; ++i) {
      out.push_back({buffer[i] & ~kFromProcess, (buffer[i] & kFromProcess) != 0});
    }
  }
}

void SignalPipe::restore_in_child(const sigset_t& mask) const {
  for (std::size_t i = 0; i < kSignals.size(); ++i)
    ::sigaction(kSignals[i], &previous_[i], nullptr);
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
}

}  // namespace tinyllama::dist
