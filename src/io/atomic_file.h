#pragma once
// Output files that are complete or absent (DESIGN §4: never a partial file).
//
// A regular file (or a missing one) is written to a unique temporary file in
// the same directory -- mkstemp, so two runs saving to one path never share
// it, and a short name, so a legal 255-byte file name still has room -- then
// synced and renamed over the target. A symlink is followed: its target is
// replaced, the link stays. A character device or FIFO (/dev/null, a
// terminal, a pipe, `>(jq .)`) and the descriptor paths (/dev/stdout,
// /dev/fd/N, /proc/self/fd/N) are what the user wants written to, so they
// are written through in place (appending, so a redirected stdout keeps what
// was printed before); nothing else that exists and is not a regular file
// is ever replaced.
#include <cstddef>
#include <functional>
#include <string>

namespace tinyllama {

// Where write_atomically's bytes go.
class FileSink {
 public:
  FileSink(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  // Writes all n bytes; throws RuntimeFailure naming the path.
  void write(const void* data, std::size_t n);
  void write(const std::string& s) { write(s.data(), s.size()); }

 private:
  int fd_;
  std::string path_;
};

// Writes what `fill` writes to `path` as described above. Throws
// RuntimeFailure "FLAG PATH: what went wrong" (flag may be empty) and leaves
// no temporary file behind.
void write_atomically(const std::string& flag, const std::string& path,
                      const std::function<void(FileSink&)>& fill);

// The checks a run makes before it starts on each output path, so that a bad
// one fails at once instead of after training: the directory exists and a
// file can be created in it, the path is not a directory, an existing
// non-regular target is one that is written through. Throws UsageError
// "FLAG PATH: reason". An empty path passes.
void check_output_path(const std::string& flag, const std::string& path);

// The same checks for a directory outputs go into: an existing directory
// where a file can be created, or a missing one whose nearest existing
// ancestor is such a directory (the run creates the rest). Throws
// UsageError "FLAG DIR: reason".
void check_output_directory(const std::string& flag, const std::string& dir);

// Whether write_atomically writes `path` in place (a device, a FIFO, a
// descriptor path) rather than replacing a regular file.
bool written_in_place(const std::string& path);

// Whether two output paths name the same file (after following symlinks);
// paths written in place never clash (two outputs to /dev/null are fine).
bool same_output_file(const std::string& a, const std::string& b);

// For a signal handler about to _exit: unlinks the temporary file being
// written at that moment, if any. Async-signal-safe.
void remove_pending_temporary() noexcept;

}  // namespace tinyllama
