#include "dist/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include "core/errors.h"
#include "dist/signal_pipe.h"
#include "dist/unique_fd.h"

extern char** environ;  // NOLINT: POSIX declares it nowhere else

namespace tinyllama::dist {
namespace {

using Clock = std::chrono::steady_clock;

// The directory holding the rendezvous file, removed with everything in it on every return path.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/tinyllama-ranks-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw RuntimeFailure("cannot create a directory for the ranks' rendezvous in " + pattern +
                           " (" + std::strerror(errno) + "); set TMPDIR to a writable directory");
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// argv and envp as execve takes them, built before fork: after a fork in a threaded process the
// child may only make async-signal-safe calls, so no allocation there. Moving one keeps `pointers`
// valid: the strings stay in the buffer the moved vector takes along.
struct ExecArgs {
  std::vector<std::string> storage;
  std::vector<char*> pointers;
  void seal() {
    for (auto& s : storage) pointers.push_back(s.data());
    pointers.push_back(nullptr);
  }
};

ExecArgs child_env(const LaunchSpec& spec, int rank, const std::string& rendezvous_file) {
  const std::string ours[] = {
      "RANK=" + std::to_string(rank),
      "WORLD_SIZE=" + std::to_string(spec.world),
      "LOCAL_RANK=" + std::to_string(rank),
      "TINYLLAMA_RENDEZVOUS_FILE=" + rendezvous_file,
      "TINYLLAMA_LAUNCHER_PID=" + std::to_string(::getpid()),
      "NCCL_NVLS_ENABLE=0",
  };
  ExecArgs env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const bool replaced = std::any_of(std::begin(ours), std::end(ours), [&](const std::string& o) {
      return entry.substr(0, entry.find('=') + 1) == o.substr(0, o.find('=') + 1);
    });
    if (!replaced) env.storage.emplace_back(entry);
  }
  env.storage.insert(env.storage.end(), std::begin(ours), std::end(ours));
  env.seal();
  return env;
}

struct Child {
  pid_t pid = -1;
  bool live = false;
  bool sent_term = false;
  bool sent_kill = false;
  int code = 0;  // the exit code, or 128 + the signal that ended it
  // Stopped by a job-control signal since (the launcher's clock); none while it runs.
  std::optional<std::chrono::steady_clock::time_point> stopped_since;
  int stop_signal = 0;
};

class Supervisor {
 public:
  Supervisor(int world, std::chrono::milliseconds grace, std::chrono::milliseconds stopped_limit,
             SignalPipe& signals)
      : children_(static_cast<std::size_t>(world)),
        grace_(grace),
        stopped_limit_(stopped_limit),
        signals_(signals) {}

  // fork + execve of rank `rank`; on failure, the reason (the rank is then not started).
  std::string start(int rank, const char* path, char* const* argv, char* const* envp) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      return std::string("cannot create a pipe: ") + std::strerror(errno);
    UniqueFd read_end(fds[0]);
    UniqueFd write_end(fds[1]);
    // Our handlers stay blocked from fork until the child has put back the dispositions it
    // inherited, so a signal in between cannot reach the launcher's pipe from the child.
    sigset_t block;
    sigset_t old;
    sigemptyset(&block);
    for (int sig : SignalPipe::kSignals) sigaddset(&block, sig);
    ::pthread_sigmask(SIG_BLOCK, &block, &old);
    const pid_t pid = ::fork();
    if (pid == 0) {
      signals_.restore_in_child(old);
      ::execve(path, argv, envp);
      const int err = errno;
      [[maybe_unused]] const ssize_t n = ::write(write_end.get(), &err, sizeof err);
      ::_exit(127);
    }
    const int fork_errno = errno;
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
    if (pid < 0) return std::string("cannot fork: ") + std::strerror(fork_errno);
    write_end.reset();
    // The pipe closes on a successful exec (CLOEXEC) with nothing in it, or carries exec's errno.
    int err = 0;
    ssize_t n = 0;
    do {
      n = ::read(read_end.get(), &err, sizeof err);
    } while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof err)) {
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return "cannot run " + std::string(path) + " (" + std::strerror(err) + ")";
    }
    Child& c = children_[static_cast<std::size_t>(rank)];
    c.pid = pid;
    c.live = true;
    return {};
  }

  // Waits until every started rank has been reaped, reacting to signals and failures.
  void wait_all() {
    while (any_live()) {
      int timeout_ms = 200;  // a bound so that nothing hangs on a lost wake-up
      if (stopping_ && !killed_) {
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(kill_at_ - Clock::now());
        timeout_ms = static_cast<int>(std::clamp<long long>(left.count(), 0, timeout_ms));
      }
      pollfd p{signals_.fd(), POLLIN, 0};
      ::poll(&p, 1, timeout_ms);  // EINTR: just loop
      for (const SignalPipe::Received& r : signals_.drain()) on_launcher_signal(r);
      reap();
      fail_stopped_ranks();
      if (stopping_ && !killed_ && Clock::now() >= kill_at_ && any_live()) {
        signal_live(SIGKILL);
        killed_ = true;
      }
    }
  }

  // Stops every rank started so far (a later rank could not start).
  void stop_all() {
    if (!stopping_) begin_stopping();
    wait_all();
  }

  int result() const {
    if (failed_) return 1;
    const bool all_zero =
        std::all_of(children_.begin(), children_.end(), [](const Child& c) { return c.code == 0; });
    if (all_zero) return 0;
    if (first_interrupt_ != 0) return 128 + first_interrupt_;
    for (const Child& c : children_) {
      if (c.code != 0) return c.code;  // rank 0's first
    }
    return 0;
  }

 private:
  bool any_live() const {
    return std::any_of(children_.begin(), children_.end(), [](const Child& c) { return c.live; });
  }

  void signal_live(int sig) {
    for (Child& c : children_) {
      if (!c.live) continue;  // a reaped pid may belong to someone else by now
      ::kill(c.pid, sig);
      (sig == SIGKILL ? c.sent_kill : c.sent_term) = true;
    }
  }

  void begin_stopping() {
    stopping_ = true;
    kill_at_ = Clock::now() + grace_;
    if (any_live()) {
      std::fprintf(stderr, "stopping the other ranks\n");
      signal_live(SIGTERM);
    }
  }

  void on_launcher_signal(const SignalPipe::Received& r) {
    const int sig = r.sig;
    if (sig != SIGINT && sig != SIGTERM) return;  // SIGCHLD only wakes the loop
    if (++interrupts_ == 1) {
      first_interrupt_ = sig;
      // A terminal's SIGINT reached the ranks already (one process group); a SIGTERM, or a
      // SIGINT a process sent to the launcher alone (kill -INT, a scheduler), did not.
      if (sig == SIGTERM || r.from_process) signal_live(sig);
    } else {
      signal_live(SIGKILL);
    }
  }

  void reap() {
    for (std::size_t rank = 0; rank < children_.size(); ++rank) {
      Child& c = children_[rank];
      if (!c.live) continue;
      int status = 0;
      pid_t r = 0;
      do {
        r = ::waitpid(c.pid, &status, WNOHANG | WUNTRACED | WCONTINUED);
      } while (r < 0 && errno == EINTR);
      if (r == 0) continue;
      if (r > 0 && WIFSTOPPED(status)) {
        if (!c.stopped_since) c.stopped_since = Clock::now();
        c.stop_signal = WSTOPSIG(status);
        continue;
      }
      if (r > 0 && WIFCONTINUED(status)) {
        c.stopped_since.reset();
        continue;
      }
      c.live = false;
      if (r < 0) {  // reaped elsewhere (ECHILD): the status is lost, count it as a failure
        report(rank, "ended and its exit status was lost");
        continue;
      }
      if (WIFEXITED(status)) {
        c.code = WEXITSTATUS(status);
        if (c.code != 0 && c.code != 130 && c.code != 143) {
          report(rank, "exited with code " + std::to_string(c.code));
        }
        continue;
      }
      const int sig = WTERMSIG(status);
      c.code = 128 + sig;
      // Not a failure: the signals we passed on, and the interrupt the launcher got too.
      const bool ours = (sig == SIGTERM && (c.sent_term || first_interrupt_ == SIGTERM)) ||
                        (sig == SIGKILL && c.sent_kill) || (sig == SIGINT && interrupts_ > 0);
      if (!ours) {
        report(rank, "was killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")");
      }
    }
  }

  // A rank stopped for stopped_limit_ while another runs holds that one in its collectives for
  // good. A gap in this loop far longer than its poll bound means the launcher was stopped too
  // (a Ctrl-Z to the job): the stops it saw start counting again from now.
  void fail_stopped_ranks() {
    const Clock::time_point now = Clock::now();
    const bool launcher_was_stopped = now - last_check_ > std::chrono::seconds(2);
    last_check_ = now;
    const bool any_running = std::any_of(children_.begin(), children_.end(),
                                         [](const Child& c) { return c.live && !c.stopped_since; });
    for (std::size_t rank = 0; rank < children_.size(); ++rank) {
      Child& c = children_[rank];
      if (!c.live || !c.stopped_since || c.sent_kill) continue;
      if (launcher_was_stopped || !any_running) c.stopped_since = now;
      if (now - *c.stopped_since < stopped_limit_) continue;
      const auto seconds = std::chrono::duration<double>(stopped_limit_).count();
      char what[160];
      std::snprintf(what, sizeof what,
                    "was stopped by signal %d (%s) for %.3g s while the others wait for it",
                    c.stop_signal, ::strsignal(c.stop_signal), seconds);
      report(rank, what);
      ::kill(c.pid, SIGKILL);  // stopped, it could not act on the SIGTERM the others get
      c.sent_kill = true;
    }
  }

  void report(std::size_t rank, const std::string& what) {
    std::fprintf(stderr, "rank %zu %s\n", rank, what.c_str());
    failed_ = true;
    if (!stopping_) begin_stopping();
  }

  std::vector<Child> children_;
  std::chrono::milliseconds grace_;
  std::chrono::milliseconds stopped_limit_;
  Clock::time_point last_check_ = Clock::now();
  SignalPipe& signals_;
  bool failed_ = false;
  bool stopping_ = false;
  bool killed_ = false;
  Clock::time_point kill_at_{};
  int interrupts_ = 0;
  int first_interrupt_ = 0;
};

// What the children show as argv[0]: the real path behind /proc/self/exe, for their messages.
std::string program_name(const std::string& executable) {
  if (executable != "/proc/self/exe") return executable;
  char buffer[PATH_MAX];
  const ssize_t n = ::readlink(executable.c_str(), buffer, sizeof buffer - 1);
  return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : executable;
}

}  // namespace

int launch_local_ranks(const LaunchSpec& spec) {
  if (spec.world < 1) {
    throw UsageError("--gpus " + std::to_string(spec.world) +
                     " starts no rank; give the number of GPUs to train on (at least 1)");
  }
  const TempDir dir;
  const std::string rendezvous_file = dir.path() + "/nccl_id";
  ExecArgs argv;
  argv.storage.push_back(program_name(spec.executable));
  argv.storage.insert(argv.storage.end(), spec.args.begin(), spec.args.end());
  argv.seal();
  std::vector<ExecArgs> envs;
  envs.reserve(static_cast<std::size_t>(spec.world));
  for (int rank = 0; rank < spec.world; ++rank) {
    envs.push_back(child_env(spec, rank, rendezvous_file));
  }

  SignalPipe signals;
  Supervisor supervisor(spec.world, spec.stop_grace, spec.stopped_limit, signals);
  for (int rank = 0; rank < spec.world; ++rank) {
    const std::string error = supervisor.start(rank, spec.executable.c_str(), argv.pointers.data(),
                                               envs[rank].pointers.data());
    if (!error.empty()) {
      supervisor.stop_all();
      throw RuntimeFailure("rank " + std::to_string(rank) + " could not start: " + error +
                           "; check that the executable exists and can be run");
    }
  }
  supervisor.wait_all();
  return supervisor.result();
}

}  // namespace tinyllama::dist
