#include "dist/rank_env.h"

#include <charconv>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "core/errors.h"

namespace tinyllama::dist {
namespace {

// A variable that was found: its name (for the message) and its value.
struct Found {
  const char* name = nullptr;
  std::string_view value;
};

// The first of `names` that is set to something non-empty; mpirun's names come after ours so that
// a launcher running under mpirun (or torchrun inside an MPI allocation) wins.
std::optional<Found> first_set(const std::function<const char*(const char*)>& get,
                               std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* value = get(name);
    if (value != nullptr && *value != '\0') return Found{name, value};
  }
  return std::nullopt;
}

// A whole-string decimal integer; no sign other than '-', no spaces, no trailing junk, so that
// "1 " or "2x" is reported rather than read as 1 or 2.
int parse_int(const Found& found) {
  int out = 0;
  const char* begin = found.value.data();
  const char* end = begin + found.value.size();
  auto [ptr, ec] = std::from_chars(begin, end, out);
  if (ec != std::errc() || ptr != end) {
    throw UsageError(std::string(found.name) + "='" + std::string(found.value) +
                     "' is not an integer; set it to a whole number (e.g. " + found.name + "=0)");
  }
  return out;
}

}  // namespace

std::optional<RankEnv> rank_env_from(const std::function<const char*(const char*)>& get) {
  const auto world = first_set(get, {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"});
  if (!world) return std::nullopt;

  RankEnv env;
  env.world = parse_int(*world);
  if (env.world < 1) {
    throw UsageError(std::string(world->name) + "=" + std::to_string(env.world) +
                     " must be at least 1; set it to the number of ranks in the job");
  }

  const auto rank = first_set(get, {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"});
  if (rank) {
    env.rank = parse_int(*rank);
    if (env.rank < 0 || env.rank >= env.world) {
      throw UsageError(std::string(rank->name) + "=" + std::to_string(env.rank) +
                       " is outside [0, " + std::to_string(env.world) + "); set it below " +
                       world->name + "=" + std::to_string(env.world));
    }
  } else if (env.world > 1) {
    // Defaulting to 0 would make every rank believe it is rank 0 and wait for the others forever.
    throw UsageError(std::string(world->name) + "=" + std::to_string(env.world) +
                     " but RANK is not set; set RANK to this process's index in [0, " +
                     std::to_string(env.world) + ")");
  }

  env.local_rank = env.rank;
  if (const auto local = first_set(get, {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"})) {
    env.local_rank = parse_int(*local);
    if (env.local_rank < 0) {
      throw UsageError(std::string(local->name) + "=" + std::to_string(env.local_rank) +
                       " is negative; set it to this process's GPU index on its host");
    }
  }

  if (const auto port = first_set(get, {"MASTER_PORT"})) {
    env.master_port = parse_int(*port);
    if (env.master_port < 0 || env.master_port > 65535) {
      throw UsageError("MASTER_PORT=" + std::to_string(env.master_port) +
                       " is not a TCP port; set it to a free port in [1, 65535]");
    }
  }
  if (const auto addr = first_set(get, {"MASTER_ADDR"})) {
    env.master_addr = std::string(addr->value);
  } else if (env.master_port != 0) {
    env.master_addr = "127.0.0.1";  // torchrun's single-host default
  }
  if (const auto file = first_set(get, {"TINYLLAMA_RENDEZVOUS_FILE"})) {
    env.rendezvous_file = std::string(file->value);
  }
  if (const auto launcher = first_set(get, {"TINYLLAMA_LAUNCHER_PID"})) {
    env.launcher_pid = parse_int(*launcher);
  }

  if (env.world > 1 && env.rendezvous_file.empty() && env.master_port == 0) {
    throw UsageError(std::string(world->name) + "=" + std::to_string(env.world) +
                     " needs a way for the ranks to meet: set MASTER_ADDR and MASTER_PORT "
                     "(rank 0's host and a free port), or start the job with `tinyllama train "
                     "--gpus N`, which sets TINYLLAMA_RENDEZVOUS_FILE");
  }
  return env;
}

std::optional<RankEnv> rank_env() {
  return rank_env_from([](const char* name) { return std::getenv(name); });
}

}  // namespace tinyllama::dist
