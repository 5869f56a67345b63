#pragma once
// Ctrl-C and SIGTERM for the commands that only write files (prepare,
// tokenizer train): there is nothing to finish, so the process ends at once
// with 128 + the signal, after removing the file it was writing at that
// moment (io/atomic_file.h), so no output is left half-written.
namespace tinyllama::cli {

class StopOnSignal {
 public:
  StopOnSignal();   // installs the handlers
  ~StopOnSignal();  // restores the ones before
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
};

}  // namespace tinyllama::cli
