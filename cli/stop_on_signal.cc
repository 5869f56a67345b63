#include "stop_on_signal.h"

#include <unistd.h>

#include <csignal>

#include "io/atomic_file.h"

namespace tinyllama::cli {
namespace {

struct sigaction previous_int;
struct sigaction previous_term;

void stop(int signal) {
  remove_pending_temporary();
  ::_exit(128 + signal);
}

}  // namespace

StopOnSignal::StopOnSignal() {
  struct sigaction action {};
  action.sa_handler = stop;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, &previous_int);
  ::sigaction(SIGTERM, &action, &previous_term);
}

StopOnSignal::~StopOnSignal() {
  ::sigaction(SIGINT, &previous_int, nullptr);
  ::sigaction(SIGTERM, &previous_term, nullptr);
}

}  // namespace tinyllama::cli
