// The TCP half of the rendezvous (dist/rendezvous.h): rank 0 serves the framed blob to each rank
// that connects and names itself; the others retry until rank 0 listens. Every socket is
// non-blocking and every wait is a poll() bounded by the rendezvous deadline, so a rank that
// never comes, or a peer that connects and says nothing, costs time but never hangs the job.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "core/errors.h"
#include "dist/rendezvous_detail.h"
#include "dist/unique_fd.h"

namespace tinyllama::dist::detail {
namespace {

// A rank's hello: 8 bytes of magic and its rank (4 bytes, little-endian). Rank 0 serves only
// ranks that say it, once each, so a port scanner or a stray client cannot take a rank's place.
constexpr char kHello[8] = {'T', 'L', 'L', 'M', 'H', 'L', 'O', '1'};
constexpr std::size_t kHelloBytes = 12;
constexpr auto kRetryInterval = std::chrono::milliseconds(20);
// One connection attempt, and one accepted peer, may take at most this much of the deadline.
constexpr auto kConnectAttempt = std::chrono::milliseconds(1000);
constexpr auto kPeerTurn = std::chrono::milliseconds(2000);

enum class Io { kOk, kClosed, kTimeout, kError };

Deadline sooner(Deadline deadline, std::chrono::milliseconds span) {
  return Deadline{std::min(deadline.at, Clock::now() + span)};
}

Io wait_for(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, deadline.remaining_ms());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Io::kError;
    // Ready, or an error or hang-up that the next send/recv reports with its errno.
    return n == 0 ? Io::kTimeout : Io::kOk;
  }
}

Io send_all(int fd, const std::uint8_t* data, std::size_t size, Deadline deadline, int& err) {
  while (size > 0) {
    // MSG_NOSIGNAL: a peer that went away is an error here, not a SIGPIPE that kills the rank.
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n >= 0) {
      data += n;
      size -= static_cast<std::size_t>(n);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      const Io w = wait_for(fd, POLLOUT, deadline);
      if (w != Io::kOk) return w;
    } else if (errno != EINTR) {
      err = errno;
      return Io::kError;
    }
  }
  return Io::kOk;
}

Io recv_exact(int fd, std::uint8_t* data, std::size_t size, Deadline deadline, int& err) {
  while (size > 0) {
    const ssize_t n = ::recv(fd, data, size, 0);
    if (n > 0) {
      data += n;
      size -= static_cast<std::size_t>(n);
    } else if (n == 0) {
      return Io::kClosed;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      const Io w = wait_for(fd, POLLIN, deadline);
      if (w != Io::kOk) return w;
    } else if (errno != EINTR) {
      err = errno;
      return Io::kError;
    }
  }
  return Io::kOk;
}

UniqueFd tcp_socket(int rank) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    throw RuntimeFailure("rank " + std::to_string(rank) + ": cannot create a TCP socket (" +
                         errno_text(errno) + "); check the process's open-file limit");
  }
  return fd;
}

std::vector<std::uint8_t> serve(const RankEnv& env, int port, const std::string& where,
                                const std::vector<std::uint8_t>& blob, Deadline deadline,
                                std::chrono::milliseconds timeout) {
  UniqueFd listener = tcp_socket(0);
  const int on = 1;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_port = htons(static_cast<std::uint16_t>(port));
  any.sin_addr.s_addr = htonl(INADDR_ANY);  // as torch's TCPStore: MASTER_ADDR may name any NIC
  if (::bind(listener.get(), reinterpret_cast<const sockaddr*>(&any), sizeof any) != 0 ||
      ::listen(listener.get(), env.world) != 0) {
    throw RuntimeFailure("rank 0: cannot listen on " + where + " (" + errno_text(errno) +
                         "); set MASTER_PORT to a port that is free on rank 0's host");
  }
  const auto framed = frame(blob);
  std::vector<bool> served(static_cast<std::size_t>(env.world), false);
  int left = env.world - 1;
  while (left > 0) {
    const Io w = wait_for(listener.get(), POLLIN, deadline);
    if (w == Io::kTimeout) break;
    if (w == Io::kError) {
      throw RuntimeFailure("rank 0: waiting for the other ranks on " + where + " failed (" +
                           errno_text(errno) + ")");
    }
    UniqueFd peer(::accept4(listener.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!peer.valid()) continue;  // the client gave up already, or a transient error: poll again
    const Deadline turn = sooner(deadline, kPeerTurn);
    std::uint8_t hello[kHelloBytes];
    int err = 0;
    if (recv_exact(peer.get(), hello, sizeof hello, turn, err) != Io::kOk) continue;
    if (std::memcmp(hello, kHello, sizeof kHello) != 0) continue;
    std::uint32_t rank = 0;
    for (int i = 0; i < 4; ++i) rank |= std::uint32_t{hello[8 + i]} << (8 * i);
    if (rank == 0 || rank >= served.size() || served[rank]) continue;
    if (send_all(peer.get(), framed.data(), framed.size(), turn, err) != Io::kOk) continue;
    served[rank] = true;
    --left;
  }
  if (left > 0) {
    std::string missing;
    for (std::size_t r = 1; r < served.size(); ++r) {
      if (!served[r]) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    throw RuntimeFailure("rank 0: rank(s) " + missing + " did not connect to " + where +
                         " within " + std::to_string(timeout.count()) +
                         " ms; check that every rank started with the same MASTER_ADDR and "
                         "MASTER_PORT and that the port is reachable from their hosts");
  }
  return blob;
}

// One try at fetching the blob; std::nullopt (with `last_error`) when it is worth trying again.
std::optional<std::vector<std::uint8_t>> try_fetch(const RankEnv& env, const sockaddr_in& addr,
                                                   const std::string& where, Deadline deadline,
                                                   std::string& last_error) {
  UniqueFd fd = tcp_socket(env.rank);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) {
      last_error = errno_text(errno);
      return std::nullopt;
    }
    if (wait_for(fd.get(), POLLOUT, sooner(deadline, kConnectAttempt)) != Io::kOk) {
      last_error = "the connection was not accepted in time";
      return std::nullopt;
    }
    int so_error = 0;
    socklen_t len = sizeof so_error;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error != 0) {
      last_error = errno_text(so_error);
      return std::nullopt;
    }
  }
  std::uint8_t hello[kHelloBytes];
  std::memcpy(hello, kHello, sizeof kHello);
  for (int i = 0; i < 4; ++i) hello[8 + i] = static_cast<std::uint8_t>(env.rank >> (8 * i));
  std::vector<std::uint8_t> bytes(kHeaderBytes);
  int err = 0;
  Io io = send_all(fd.get(), hello, sizeof hello, deadline, err);
  if (io == Io::kOk) io = recv_exact(fd.get(), bytes.data(), bytes.size(), deadline, err);
  Unframed got;
  if (io == Io::kOk) {
    got = unframe(bytes);
    if (!got.error.empty()) {
      throw RuntimeFailure("rank " + std::to_string(env.rank) + ": the server at " + where +
                           " is not tinyllama's rank 0 (" + got.error +
                           "); set MASTER_PORT to a port nothing else uses");
    }
    bytes.resize(kHeaderBytes + *got.length);
    io = recv_exact(fd.get(), bytes.data() + kHeaderBytes, *got.length, deadline, err);
  }
  if (io != Io::kOk) {
    last_error = io == Io::kClosed    ? "rank 0 closed the connection early"
                 : io == Io::kTimeout ? "rank 0 accepted but did not answer"
                                      : errno_text(err);
    return std::nullopt;
  }
  return std::vector<std::uint8_t>(bytes.begin() + kHeaderBytes, bytes.end());
}

std::vector<std::uint8_t> fetch(const RankEnv& env, int port, const std::string& where,
                                Deadline deadline, std::chrono::milliseconds timeout) {
  const std::string who = "rank " + std::to_string(env.rank) + ": ";
  std::string last_error = "no attempt finished";
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int gai = ::getaddrinfo(env.master_addr.c_str(), nullptr, &hints, &found);
    if (gai == 0) {
      sockaddr_in addr{};
      std::memcpy(&addr, found->ai_addr, sizeof addr);
      ::freeaddrinfo(found);
      addr.sin_port = htons(static_cast<std::uint16_t>(port));
      if (auto blob = try_fetch(env, addr, where, deadline, last_error)) return std::move(*blob);
    } else if (gai == EAI_AGAIN) {
      last_error = ::gai_strerror(gai);  // the resolver may come back: keep trying
    } else {
      throw RuntimeFailure(who + "cannot resolve MASTER_ADDR=" + env.master_addr + " (" +
                           ::gai_strerror(gai) + "); set it to rank 0's host name or IPv4 address");
    }
    if (deadline.passed()) break;
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
        kRetryInterval, std::chrono::milliseconds(deadline.remaining_ms())));
  }
  throw RuntimeFailure(who + "could not get the rendezvous from rank 0 at " + where + " within " +
                       std::to_string(timeout.count()) + " ms (last error: " + last_error +
                       "); check that rank 0 is running and that MASTER_ADDR and MASTER_PORT are "
                       "the same on every rank and reachable from this host");
}

}  // namespace

std::vector<std::uint8_t> share_over_tcp(const RankEnv& env, const std::vector<std::uint8_t>& blob,
                                         Deadline deadline, std::chrono::milliseconds timeout) {
  int port = env.master_port;
  std::string where = env.master_addr + ":" + std::to_string(port);
  const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (agent != nullptr && std::string_view(agent) == "True") {
    // torchrun's elastic agent serves its own store on MASTER_PORT; ours takes the next port.
    ++port;
    where = env.master_addr + ":" + std::to_string(port) +
            " (MASTER_PORT + 1: torchrun's agent store holds MASTER_PORT)";
  }
  if (port < 1 || port > 65535) {
    throw UsageError("rank " + std::to_string(env.rank) + ": the rendezvous port " +
                     std::to_string(port) + " is not a TCP port; set MASTER_PORT in [1, 65534]");
  }
  if (env.rank == 0) return serve(env, port, where, blob, deadline, timeout);
  return fetch(env, port, where, deadline, timeout);
}

}  // namespace tinyllama::dist::detail
