#include "train/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>

#include "io/atomic_file.h"

namespace tinyllama {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_relay_pid = 0;
struct sigaction g_previous_int {};
struct sigaction g_previous_term {};

// Whether a signal is the launcher relaying one (kill(2) from its pid).
bool relayed(const siginfo_t* info) {
  return info != nullptr && g_relay_pid != 0 && info->si_code == SI_USER &&
         info->si_pid == static_cast<pid_t>(g_relay_pid);
}

extern "C" void on_interrupt(int sig, siginfo_t* info, void* /*context*/) {
  if (g_signal != 0) {
    if (relayed(info)) return;  // the first interrupt again, by way of the launcher
    // Only async-signal-safe calls here: unlink and _exit.
    remove_pending_temporary();
    ::_exit(128 + sig);
  }
  g_signal = sig;
}

}  // namespace

InterruptGuard::InterruptGuard(int relay_pid) {
  g_signal = 0;
  g_relay_pid = relay_pid;
  struct sigaction sa {};
  sa.sa_sigaction = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_SIGINFO;  // a read or write in progress carries on
  sigaction(SIGINT, &sa, &g_previous_int);
  sigaction(SIGTERM, &sa, &g_previous_term);
}

InterruptGuard::~InterruptGuard() {
  sigaction(SIGINT, &g_previous_int, nullptr);
  sigaction(SIGTERM, &g_previous_term, nullptr);
}

int interrupt_signal() {
  return g_signal;
}

int interrupt_exit_code(int signal) {
  return 128 + signal;
}

}  // namespace tinyllama
