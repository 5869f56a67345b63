#include "parallel_run.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "core/errors.h"
#include "cuda/nccl/nccl_collectives.h"
#include "dist/launcher.h"
#include "dist/rendezvous.h"

namespace tinyllama::cli {
namespace {

std::vector<std::string>& process_args() {
  static std::vector<std::string> args;
  return args;
}

// How long a rank waits for the others to reach the rendezvous: they
// start together, but CUDA's first initialisation can take a while.
constexpr std::chrono::seconds kRendezvousTimeout{300};

}  // namespace

void remember_process_args(int argc, char** argv) {
  process_args().assign(argv, argv + argc);
}

std::optional<int> launch_ranks_if_asked(const ParallelRequest& request) {
  if (request.gpus == 0 || dist::rank_env()) return std::nullopt;
  const std::string why = nccl_build_note();
  if (!why.empty()) throw RuntimeFailure("--gpus: " + why);
  dist::LaunchSpec spec;
  spec.world = request.gpus;
  // Each rank runs this same command line; it finds its rank in the
  // environment the launcher adds, and checks --gpus against it.
  spec.args.assign(process_args().begin() + 1, process_args().end());
  return dist::launch_local_ranks(spec);
}

std::optional<dist::RankEnv> this_rank(const ParallelRequest& request) {
  std::optional<dist::RankEnv> env = dist::rank_env();
  if (env && request.gpus != 0 && request.gpus != env->world) {
    throw UsageError("--gpus " + std::to_string(request.gpus) + ": this process was started as " +
                     "one of WORLD_SIZE=" + std::to_string(env->world) +
                     " ranks; give --gpus only when tinyllama starts the ranks itself");
  }
  return env;
}

void prepare_rank(const dist::RankEnv& env, const ParallelRequest& request, TrainOptions& opts) {
  select_cuda_device(env.local_rank);
  opts.parallel.world = env.world;
  opts.parallel.shard_optimizer = request.zero1;
  opts.parallel.enabled = true;
  if (env.rank != 0) {
    // One report per run: rank 0's. Errors still reach stderr, named by rank.
    std::fflush(stdout);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) {
      ::dup2(null, STDOUT_FILENO);
      ::close(null);
    }
  }
}

std::unique_ptr<Collectives> join_ranks(const dist::RankEnv& env) {
  const std::vector<std::uint8_t> id = dist::share_from_rank0(
      env, env.rank == 0 ? nccl_unique_id() : std::vector<std::uint8_t>(),
      std::chrono::duration_cast<std::chrono::milliseconds>(kRendezvousTimeout));
  return make_nccl_collectives(env.rank, env.world, id);
}

}  // namespace tinyllama::cli
