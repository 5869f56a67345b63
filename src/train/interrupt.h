#pragma once
// Ctrl-C and SIGTERM during a run (DESIGN §4: an interrupted run keeps what
// it finished). The first SIGINT or SIGTERM only sets a flag: the loop
// finishes the step in flight, writes a checkpoint, the summary and the JSON
// report, and the process exits 128 + the signal (130, 143). A second one
// exits at once with the same code, removing a half-written output file.
//
// A rank of `train --gpus N` may get one interrupt twice: a SIGINT or
// SIGTERM sent to the job's whole process group (`kill -INT -- -PGID`, a
// batch scheduler) reaches it directly and again through the launcher,
// which cannot tell such a signal from one sent to it alone and relays it.
// A copy from the relaying process (`relay_pid`) after the first interrupt
// is therefore not a second Ctrl-C; the launcher escalates a real second
// one itself (SIGKILL).
namespace tinyllama {

class InterruptGuard {
 public:
  // Installs the handlers; the destructor restores the ones before.
  // relay_pid: the launcher that relays interrupts to this process, or 0.
  explicit InterruptGuard(int relay_pid = 0);
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

// The first signal received since the guard was installed, or 0.
int interrupt_signal();

// 128 + signal, the shell's convention for a process ended by a signal.
int interrupt_exit_code(int signal);

}  // namespace tinyllama
