#include "child_run.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "core/errors.h"

namespace tinyllama::cli {

ChildResult run_self(const std::vector<std::string>& args) {
  // stderr into an unlinked temporary file: no pipe to drain while waiting.
  char stderr_path[] = "/tmp/tinyllama-child-XXXXXX";
  const int err_fd = mkstemp(stderr_path);
  if (err_fd < 0)
    throw RuntimeFailure(std::string("tune: no temporary file: ") + std::strerror(errno));
  unlink(stderr_path);
  std::vector<char*> argv;
  std::string self = "/proc/self/exe";
  argv.push_back(self.data());
  std::vector<std::string> copies = args;
  for (std::string& a : copies) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(err_fd);
    throw RuntimeFailure(std::string("tune: cannot start a run: ") + std::strerror(errno));
  }
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  ChildResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (r.exit_code == 127 && WIFEXITED(status)) r.last_error = "could not run /proc/self/exe";
  lseek(err_fd, 0, SEEK_SET);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(err_fd, buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  close(err_fd);
  std::size_t end = text.find_last_not_of("\n ");
  if (end != std::string::npos) {
    const std::size_t begin = text.rfind('\n', end);
    r.last_error = text.substr(begin == std::string::npos ? 0 : begin + 1,
                               end + 1 - (begin == std::string::npos ? 0 : begin + 1));
  }
  return r;
}

}  // namespace tinyllama::cli
