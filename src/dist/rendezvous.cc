#include "dist/rendezvous.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <thread>

#include "core/errors.h"
#include "dist/rendezvous_detail.h"
#include "dist/unique_fd.h"

namespace tinyllama::dist {
namespace detail {
namespace {

constexpr char kMagic[8] = {'T', 'L', 'L', 'M', 'R', 'D', 'V', '1'};

}  // namespace

std::vector<std::uint8_t> frame(const std::vector<std::uint8_t>& blob) {
  std::vector<std::uint8_t> out(kHeaderBytes + blob.size());
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  const std::uint64_t n = blob.size();
  for (int i = 0; i < 8; ++i) out[8 + i] = static_cast<std::uint8_t>(n >> (8 * i));
  std::copy(blob.begin(), blob.end(), out.begin() + kHeaderBytes);
  return out;
}

Unframed unframe(const std::vector<std::uint8_t>& bytes) {
  Unframed out;
  const std::size_t magic_seen = std::min(bytes.size(), sizeof kMagic);
  if (std::memcmp(bytes.data(), kMagic, magic_seen) != 0) {
    out.error = "it does not start with tinyllama's rendezvous header";
    return out;
  }
  if (bytes.size() < kHeaderBytes) return out;
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{bytes[8 + i]} << (8 * i);
  if (n > kMaxBlobBytes) {
    out.error =
        "its header announces " + std::to_string(n) + " bytes, more than a rendezvous holds";
    return out;
  }
  out.length = n;
  if (bytes.size() > kHeaderBytes + n) {
    out.error = "it holds " + std::to_string(bytes.size() - kHeaderBytes) +
                " bytes after its header, which announces " + std::to_string(n);
  } else if (bytes.size() == kHeaderBytes + n) {
    out.complete.emplace(bytes.begin() + kHeaderBytes, bytes.end());
  }
  return out;
}

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

}  // namespace detail

namespace {

using detail::Deadline;
using detail::errno_text;

constexpr auto kFilePollInterval = std::chrono::milliseconds(20);

// Rank 0: a unique temporary in the target's directory (rename is atomic only within one file
// system), written, synced and renamed onto the path; the temporary is removed on any failure.
void publish_file(const std::string& path, const std::vector<std::uint8_t>& blob) {
  const std::filesystem::path target(path);
  const auto parent = target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  std::string temp = (parent / ("." + target.filename().string() + ".XXXXXX")).string();
  auto fail = [&](const char* what, int err) {
    ::unlink(temp.c_str());
    throw RuntimeFailure("rank 0: cannot " + std::string(what) + " the rendezvous file " + path +
                         " (" + errno_text(err) +
                         "); check that TINYLLAMA_RENDEZVOUS_FILE's directory exists and is "
                         "writable");
  };
  UniqueFd fd(::mkostemp(temp.data(), O_CLOEXEC));
  if (!fd.valid()) {
    const int err = errno;
    temp.clear();  // nothing was created, nothing to unlink
    fail("create a temporary for", err);
  }
  const auto bytes = detail::frame(blob);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write", errno);
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd.get()) != 0) fail("sync", errno);
  // Closed by hand to see its error (a network file system may report a failed write only here).
  if (::close(fd.release()) != 0 && errno != EINTR) fail("close", errno);
  if (::rename(temp.c_str(), path.c_str()) != 0) fail("rename onto", errno);
}

// Other ranks: the whole file as it is now; std::nullopt while it does not exist.
std::optional<std::vector<std::uint8_t>> read_file(const std::string& path, int rank) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::nullopt;
    throw RuntimeFailure("rank " + std::to_string(rank) + ": cannot read the rendezvous file " +
                         path + " (" + errno_text(errno) + "); check its permissions");
  }
  std::vector<std::uint8_t> bytes;
  std::uint8_t buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw RuntimeFailure("rank " + std::to_string(rank) + ": cannot read the rendezvous file " +
                           path + " (" + errno_text(errno) + ")");
    }
    if (n == 0) return bytes;
    bytes.insert(bytes.end(), buffer, buffer + n);
    // Stop reading a huge foreign file early: the header check below rejects it anyway.
    if (bytes.size() > detail::kHeaderBytes + detail::kMaxBlobBytes) return bytes;
  }
}

std::vector<std::uint8_t> receive_file(const RankEnv& env, Deadline deadline,
                                       std::chrono::milliseconds timeout) {
  const std::string who = "rank " + std::to_string(env.rank) + ": ";
  std::optional<std::vector<std::uint8_t>> last;
  for (;;) {
    last = read_file(env.rendezvous_file, env.rank);
    if (last) {
      auto got = detail::unframe(*last);
      if (!got.error.empty()) {
        throw RuntimeFailure(who + "the rendezvous file " + env.rendezvous_file +
                             " is not rank 0's: " + got.error +
                             "; remove it or point TINYLLAMA_RENDEZVOUS_FILE at a fresh path");
      }
      if (got.complete) return std::move(*got.complete);
    }
    if (deadline.passed()) break;
    // Our writer renames a complete file into place, so a short file only comes from another
    // writer; it still gets until the deadline to finish.
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        kFilePollInterval, std::chrono::milliseconds(deadline.remaining_ms())));
  }
  if (last) {
    throw RuntimeFailure(who + "the rendezvous file " + env.rendezvous_file + " holds only " +
                         std::to_string(last->size()) + " bytes after " +
                         std::to_string(timeout.count()) +
                         " ms, less than its header announces; remove it and start the job again");
  }
  throw RuntimeFailure(who + "rank 0 did not write the rendezvous file " + env.rendezvous_file +
                       " within " + std::to_string(timeout.count()) +
                       " ms; check that rank 0 started and did not fail, and that every rank has "
                       "the same TINYLLAMA_RENDEZVOUS_FILE on a file system they share");
}

}  // namespace

std::vector<std::uint8_t> share_from_rank0(const RankEnv& env,
                                           const std::vector<std::uint8_t>& blob,
                                           std::chrono::milliseconds timeout) {
  if (env.world < 1 || env.rank < 0 || env.rank >= env.world) {
    throw UsageError("rank " + std::to_string(env.rank) + " of " + std::to_string(env.world) +
                     " ranks is not a place in the job; check RANK and WORLD_SIZE");
  }
  if (env.rank == 0 && blob.size() > detail::kMaxBlobBytes) {
    throw UsageError("a rendezvous carries at most " + std::to_string(detail::kMaxBlobBytes) +
                     " bytes, not " + std::to_string(blob.size()));
  }
  if (env.world == 1) return blob;
  const Deadline deadline{detail::Clock::now() + timeout};
  if (!env.rendezvous_file.empty()) {
    if (env.rank == 0) {
      publish_file(env.rendezvous_file, blob);
      return blob;
    }
    return receive_file(env, deadline, timeout);
  }
  if (env.master_port == 0) {
    throw UsageError("rank " + std::to_string(env.rank) + " of " + std::to_string(env.world) +
                     " has no way to meet rank 0: set MASTER_ADDR and MASTER_PORT, or start the "
                     "job with `tinyllama train --gpus N`");
  }
  return detail::share_over_tcp(env, blob, deadline, timeout);
}

}  // namespace tinyllama::dist
