#pragma once
// One child process of the bench or of `tune`: a train run of this binary,
// or the peer script, with its stdout and stderr in files beside the point's
// outputs. Each point in a process of its own fails alone (out of memory
// included) and gives its device memory back before the next one starts.
#include <string>
#include <vector>

namespace tinyllama::suite {

struct ChildResult {
  int exit_code = -1;  // 128 + signal when killed by one
  bool timed_out = false;
  std::string error_line;  // the last "error: ..." line of stderr (else its last line)
  std::string last_line;   // the last non-empty line of stderr, as written
};

// Runs `program` (a path, e.g. "/proc/self/exe", or a name looked up in PATH) with `args`, stdout
// to out_path and stderr to err_path; kills it (SIGTERM, then SIGKILL 10 s
// later) after timeout_s seconds (0: no limit). Throws RuntimeFailure when
// it cannot be started.
ChildResult run_child(const std::string& program, const std::vector<std::string>& args,
                      const std::string& out_path, const std::string& err_path, double timeout_s);

// The last line starting "error: " in text, without the prefix; else the
// last non-empty line; "" for empty text.
std::string last_error_line(const std::string& text);

// The last line of text that is not blank, with its trailing blanks and
// newlines dropped; "" when there is none.
std::string last_nonblank_line(const std::string& text);

}  // namespace tinyllama::suite
