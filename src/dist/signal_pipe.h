#pragma once
// The launcher's signals as bytes on a pipe (the self-pipe trick): the handler only write()s, which
// is async-signal-safe, and the wait loop poll()s the pipe beside its waitpid(WNOHANG) calls. A
// handler rather than a blocked mask + sigwait, because a mask is per thread: in a process whose
// other threads (OpenBLAS's pool) leave SIGINT unblocked, a blocked-mask design would let one of
// them take the default action and kill the launcher.
#include <signal.h>

#include <array>
#include <vector>

#include "dist/unique_fd.h"

namespace tinyllama::dist {

class SignalPipe {
 public:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGCHLD};

  // Installs the handlers; RuntimeFailure when another SignalPipe is alive in the process.
  SignalPipe();
  // Restores the dispositions found.
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  // The descriptor to poll for POLLIN.
  int fd() const { return read_.get(); }
  struct Received {
    int sig = 0;
    // Sent by a process (kill, a scheduler, timeout), not by the kernel for
    // a terminal's key: only the launcher got it, not the ranks beside it
    // in the terminal's process group.
    bool from_process = false;
  };
  // The signals received since the last call, in order.
  std::vector<Received> drain();
  // In a forked child before exec (async-signal-safe): the dispositions found, and `mask`.
  void restore_in_child(const sigset_t& mask) const;

 private:
  UniqueFd read_;
  UniqueFd write_;
  std::array<struct sigaction, kSignals.size()> previous_{};
};

}  // namespace tinyllama::dist
