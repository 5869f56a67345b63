#pragma once
// Runs this same binary as a child process with other arguments and waits
// for it: `tune` measures each batch size in a child of its own, so a run
// that runs out of memory (or crashes) fails only that point.
#include <string>
#include <vector>

namespace tinyllama::cli {

struct ChildResult {
  int exit_code = 0;       // the child's; 128 + N when killed by signal N
  std::string last_error;  // its last non-empty stderr line ("error: ...")
};

// argv[1..] = args; the child's stdout goes to /dev/null, its stderr is
// kept for last_error. Throws RuntimeFailure when it cannot be started.
ChildResult run_self(const std::vector<std::string>& args);

}  // namespace tinyllama::cli
