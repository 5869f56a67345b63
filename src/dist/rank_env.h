#pragma once
// Where this process sits in a data-parallel job (one process per GPU): its rank, the number of
// ranks, and how the ranks find each other to share NCCL's unique id (dist/rendezvous.h). Read from
// the variables our own launcher (dist/launcher.h), torchrun or mpirun set.
#include <functional>
#include <optional>
#include <string>

namespace tinyllama::dist {

struct RankEnv {
  int rank = 0;                 // RANK
  int world = 1;                // WORLD_SIZE
  int local_rank = 0;           // LOCAL_RANK (default: rank)
  std::string master_addr;      // MASTER_ADDR (default 127.0.0.1 when a port is given)
  int master_port = 0;          // MASTER_PORT (0: none)
  std::string rendezvous_file;  // TINYLLAMA_RENDEZVOUS_FILE (set by our own launcher)
  // TINYLLAMA_LAUNCHER_PID (set by our own launcher, 0 otherwise): the process that relays an
  // interrupt sent to it alone, which the rank may also have received itself (train/interrupt.h).
  int launcher_pid = 0;
};

// std::nullopt when WORLD_SIZE is unset (a plain single-process run). Throws UsageError naming the
// variable for malformed numbers, WORLD_SIZE < 1, RANK outside [0, WORLD_SIZE), LOCAL_RANK < 0,
// or WORLD_SIZE > 1 with neither TINYLLAMA_RENDEZVOUS_FILE nor MASTER_PORT set (say how to set
// them).
//
// mpirun's variables stand in when ours are absent: OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE /
// OMPI_COMM_WORLD_LOCAL_RANK (Open MPI), then PMI_RANK / PMI_SIZE (MPICH, Intel MPI). A variable
// set to the empty string counts as unset. `get` returns a variable's value or nullptr.
std::optional<RankEnv> rank_env_from(const std::function<const char*(const char*)>& get);

// rank_env_from over the real environment (std::getenv).
std::optional<RankEnv> rank_env();

}  // namespace tinyllama::dist
