#include "io/atomic_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string_view>

#include "core/errors.h"

namespace fs = std::filesystem;

namespace tinyllama {
namespace {

// The temporary file being written, for remove_pending_temporary(): a fixed
// buffer and a flag, the only state a signal handler may read.
char g_pending[PATH_MAX + 1];
volatile std::sig_atomic_t g_has_pending = 0;

std::string errno_text(int err) {
  return std::strerror(err);
}

std::string where(const std::string& flag, const std::string& path) {
  return flag.empty() ? path : flag + " " + path;
}

[[noreturn]] void fail(const std::string& flag, const std::string& path, const std::string& why) {
  throw RuntimeFailure(where(flag, path) + ": " + why);
}

[[noreturn]] void refuse(const std::string& flag, const std::string& path, const std::string& why) {
  throw UsageError(where(flag, path) + ": " + why);
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Paths that name an open descriptor of this process: opening them reopens
// what the descriptor points at, which must never be renamed over.
bool descriptor_path(const std::string& path) {
  for (const char* p :
       {"/dev/stdout", "/dev/stderr", "/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/"}) {
    if (starts_with(path, p)) return true;
  }
  return false;
}

const char* kind_of(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISFIFO(mode)) return "a FIFO";
  return "not a regular file";
}

// What a path names now, symlinks followed.
struct Target {
  bool exists = false;
  bool dangling = false;  // a symlink to nothing
  mode_t mode = 0;
  fs::path file;  // the file to replace: the symlink's target, or the path
};

Target inspect(const std::string& path) {
  Target t;
  t.file = path;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return t;
  if (S_ISLNK(st.st_mode)) {
    if (::stat(path.c_str(), &st) != 0) {
      t.dangling = true;
      return t;
    }
    std::error_code ec;
    const fs::path real = fs::canonical(path, ec);
    if (!ec) t.file = real;
  }
  t.exists = true;
  t.mode = st.st_mode;
  return t;
}

bool in_place(const Target& t, const std::string& path) {
  return descriptor_path(path) || (t.exists && (S_ISCHR(t.mode) || S_ISFIFO(t.mode)));
}

fs::path directory_of(const fs::path& file) {
  const fs::path dir = file.parent_path();
  return dir.empty() ? fs::path(".") : dir;
}

class Temporary {
 public:
  Temporary() = default;
  Temporary(const Temporary&) = delete;
  Temporary& operator=(const Temporary&) = delete;
  ~Temporary() {
    if (fd >= 0) ::close(fd);
    if (!name.empty() && !renamed) {
      g_has_pending = 0;
      ::unlink(name.c_str());
    }
  }
  // A unique name in `dir`, created with mode 0600 and then given `mode`.
  // Returns errno on failure.
  int create(const fs::path& dir, mode_t mode) {
    std::string pattern = (dir / ".tinyllama-XXXXXX.tmp").string();
    if (pattern.size() > PATH_MAX) return ENAMETOOLONG;
    fd = ::mkostemps(pattern.data(), 4, O_CLOEXEC);
    if (fd < 0) return errno;
    name = pattern;
    g_has_pending = 0;
    std::memcpy(g_pending, name.c_str(), name.size() + 1);
    g_has_pending = 1;
    ::fchmod(fd, mode);
    return 0;
  }
  int fd = -1;
  std::string name;
  bool renamed = false;
};

mode_t new_file_mode(const Target& t) {
  if (t.exists) return t.mode & 07777;
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

// Makes the rename durable; best effort, the rename itself has happened.
void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void write_in_place(const std::string& flag, const std::string& path,
                    const std::function<void(FileSink&)>& fill) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) fail(flag, path, "cannot open for writing: " + errno_text(errno));
  try {
    FileSink sink(fd, where(flag, path));
    fill(sink);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) fail(flag, path, "cannot write: " + errno_text(errno));
}

}  // namespace

void FileSink::write(const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);  // may write less than asked: loop
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw RuntimeFailure(path_ + ": cannot write: " + errno_text(errno));
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

bool written_in_place(const std::string& path) {
  return in_place(inspect(path), path);
}

void write_atomically(const std::string& flag, const std::string& path,
                      const std::function<void(FileSink&)>& fill) {
  const Target t = inspect(path);
  if (in_place(t, path)) {
    write_in_place(flag, path, fill);
    return;
  }
  if (t.dangling) fail(flag, path, "is a symlink to a missing file");
  if (t.exists && !S_ISREG(t.mode)) {
    fail(flag, path, std::string("exists and is ") + kind_of(t.mode) + "; not replacing it");
  }
  Temporary tmp;
  const fs::path dir = directory_of(t.file);
  if (const int err = tmp.create(dir, new_file_mode(t)); err != 0) {
    fail(flag, path, "cannot create a temporary file in " + dir.string() + ": " + errno_text(err));
  }
  FileSink sink(tmp.fd, where(flag, path));
  fill(sink);
  // fsync before rename: otherwise the rename can reach the disk before the data.
  if (::fsync(tmp.fd) != 0) fail(flag, path, "cannot sync: " + errno_text(errno));
  const int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0) fail(flag, path, "cannot write: " + errno_text(errno));
  if (std::rename(tmp.name.c_str(), t.file.c_str()) != 0) {
    fail(flag, path, "cannot rename the temporary file into place: " + errno_text(errno));
  }
  tmp.renamed = true;
  g_has_pending = 0;
  sync_directory(dir);
}

void check_output_path(const std::string& flag, const std::string& path) {
  if (path.empty()) return;
  const Target t = inspect(path);
  if (in_place(t, path)) {
    if (::access(path.c_str(), W_OK) != 0) refuse(flag, path, "not writable: " + errno_text(errno));
    return;
  }
  if (t.dangling) refuse(flag, path, "is a symlink to a missing file");
  if (t.exists && !S_ISREG(t.mode)) {
    refuse(flag, path,
           std::string("exists and is ") + kind_of(t.mode) + "; refusing to replace it" +
               (S_ISDIR(t.mode) ? " (name a file inside it)" : ""));
  }
  const std::string name = t.file.filename().string();
  if (name.empty() || name == "." || name == "..") refuse(flag, path, "names no file");
  if (name.size() > NAME_MAX) {
    refuse(flag, path,
           "the file name is " + std::to_string(name.size()) + " bytes long, more than the " +
               std::to_string(NAME_MAX) + " allowed");
  }
  const fs::path dir = directory_of(t.file);
  std::error_code ec;
  if (!fs::exists(dir, ec)) refuse(flag, path, "directory " + dir.string() + " does not exist");
  if (!fs::is_directory(dir, ec)) refuse(flag, path, dir.string() + " is not a directory");
  // Creating the temporary file is the only honest test (root passes
  // access(), a read-only mount does not show in the mode bits).
  Temporary probe;
  if (const int err = probe.create(dir, 0600); err != 0) {
    refuse(flag, path,
           "cannot create a file in directory " + dir.string() + ": " + errno_text(err));
  }
}

void check_output_directory(const std::string& flag, const std::string& dir) {
  if (dir.empty()) refuse(flag, "''", "expected a directory");
  std::error_code ec;
  // The directory, or the nearest ancestor that exists (the run creates the rest).
  fs::path probe_in = fs::absolute(dir, ec).lexically_normal();
  while (!fs::exists(probe_in, ec) && probe_in.has_relative_path()) {
    probe_in = probe_in.parent_path();
  }
  if (!fs::is_directory(probe_in, ec)) {
    refuse(flag, dir,
           probe_in == fs::absolute(dir, ec).lexically_normal()
               ? "exists and is not a directory"
               : probe_in.string() + " is not a directory");
  }
  Temporary probe;
  if (const int err = probe.create(probe_in, 0600); err != 0) {
    refuse(flag, dir,
           "cannot create a file in directory " + probe_in.string() + ": " + errno_text(err));
  }
}

bool same_output_file(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  if (written_in_place(a) || written_in_place(b)) return false;
  std::error_code ea;
  std::error_code eb;
  const fs::path ca = fs::weakly_canonical(fs::absolute(a), ea);
  const fs::path cb = fs::weakly_canonical(fs::absolute(b), eb);
  if (ea || eb) return fs::absolute(a).lexically_normal() == fs::absolute(b).lexically_normal();
  return ca == cb;
}

void remove_pending_temporary() noexcept {
  if (g_has_pending) ::unlink(g_pending);
}

}  // namespace tinyllama
