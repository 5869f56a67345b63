// InterruptGuard's relay rule (train/interrupt.h): after a first interrupt,
// a copy of it from the launcher that relays signals is ignored, while a
// second interrupt from anyone else still ends the process at once (130).
// Each case runs in a forked child, the test process playing the sender.
#include "train/interrupt.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

namespace tinyllama {
namespace {

// Forks a child that installs a guard relaying from `relay_pid` (kRelayIsParent: this process),
// interrupts itself once, then waits for this process's SIGINT and a byte on a pipe; the child
// exits 0 if it survived with SIGINT noted. Returns the child's wait status.
constexpr int kRelayIsParent = -1;

int second_interrupt_from_parent(int relay_pid) {
  int ready[2], go[2];
  if (::pipe(ready) != 0 || ::pipe(go) != 0) return -1;
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child == 0) {
    const InterruptGuard guard(relay_pid == kRelayIsParent ? parent : relay_pid);
    std::raise(SIGINT);  // the first interrupt: only noted
    char byte = 0;
    if (interrupt_signal() != SIGINT || ::write(ready[1], &byte, 1) != 1) ::_exit(3);
    // The parent's SIGINT is pending before its byte arrives: the handler runs first.
    if (::read(go[0], &byte, 1) != 1) ::_exit(4);
    ::_exit(interrupt_signal() == SIGINT ? 0 : 5);
  }
  char byte = 0;
  EXPECT_EQ(::read(ready[0], &byte, 1), 1);
  ::kill(child, SIGINT);
  EXPECT_EQ(::write(go[1], &byte, 1), 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  for (int fd : {ready[0], ready[1], go[0], go[1]}) ::close(fd);
  return status;
}

TEST(InterruptGuard, RelayedCopyOfTheFirstInterruptIsIgnored) {
  const int status = second_interrupt_from_parent(kRelayIsParent);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(InterruptGuard, SecondInterruptFromAnotherProcessExitsAt130) {
  // pid 1 relays nothing here: the parent's SIGINT is a second Ctrl-C.
  const int status = second_interrupt_from_parent(1);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
}

TEST(InterruptGuard, NoRelayMeansEverySecondInterruptExits) {
  const int status = second_interrupt_from_parent(0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
}

}  // namespace
}  // namespace tinyllama
