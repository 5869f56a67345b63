#pragma once
// What the file and the TCP halves of the rendezvous share (dist/rendezvous.cc and
// rendezvous_tcp.cc); not for use outside src/dist.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dist/rank_env.h"

namespace tinyllama::dist::detail {

using Clock = std::chrono::steady_clock;

// A point in time every wait of one rendezvous is bounded by.
struct Deadline {
  Clock::time_point at;
  bool passed() const { return Clock::now() >= at; }
  // Milliseconds left for poll(), rounded up so a wait never ends a hair early and spins.
  int remaining_ms() const {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(at - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(left, 0, INT_MAX));
  }
};

// The frame both transports carry: 8 bytes of magic, the blob's length (8 bytes, little-endian),
// the blob. The length cap keeps a foreign file or peer from making us allocate gigabytes.
constexpr std::size_t kHeaderBytes = 16;
constexpr std::uint64_t kMaxBlobBytes = 1 << 20;
std::vector<std::uint8_t> frame(const std::vector<std::uint8_t>& blob);

// Reads a frame out of `bytes`, which may be a prefix of one. `complete` is the blob; `length` is
// the announced length once the header is in; `error` is set when the bytes cannot start a frame.
struct Unframed {
  std::optional<std::vector<std::uint8_t>> complete;
  std::optional<std::uint64_t> length;
  std::string error;
};
Unframed unframe(const std::vector<std::uint8_t>& bytes);

// strerror for messages (thread-safe).
std::string errno_text(int err);

std::vector<std::uint8_t> share_over_tcp(const RankEnv& env, const std::vector<std::uint8_t>& blob,
                                         Deadline deadline, std::chrono::milliseconds timeout);

}  // namespace tinyllama::dist::detail
