#include "train/interrupt.h"

#include <unistd.h>

#include <csignal>

#include "io/atomic_file.h"

namespace tinyllama {
namespace {

volatile std::sig_atomic_t g_signal = 0;
struct sigaction g_previous_int {};
struct sigaction g_previous_term {};

extern "C" void on_interrupt(int sig) {
  if (g_signal != 0) {
    // Only async-signal-safe calls here: unlink and _exit.
    remove_pending_temporary();
    ::_exit(128 + sig);
  }
  g_signal = sig;
}

}  // namespace

InterruptGuard::InterruptGuard() {
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // a read or write in progress carries on
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
