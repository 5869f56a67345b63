#pragma once
// `train --gpus N` and runs started by a launcher (torchrun, mpirun): the
// launcher side (this process starts N rank processes of itself) and the
// rank side (pick the GPU, meet the other ranks, make the collectives).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dist/rank_env.h"
#include "model/collectives.h"
#include "train/options.h"

namespace tinyllama::cli {

// main() keeps its argv here, so the launcher can start copies of this run.
void remember_process_args(int argc, char** argv);

// The parts of a data-parallel request the command line gives.
struct ParallelRequest {
  int gpus = 0;       // --gpus; 0: not given
  bool zero1 = true;  // --zero-stage 1 (default) or 0
};

// --gpus N in a process no launcher started: starts N ranks (one process
// per GPU, each this command line again) and returns the exit code for
// the whole run. std::nullopt: this process is to train itself.
std::optional<int> launch_ranks_if_asked(const ParallelRequest& request);

// This process's rank, when a launcher (ours or another) started it.
// Throws UsageError when --gpus disagrees with WORLD_SIZE.
std::optional<dist::RankEnv> this_rank(const ParallelRequest& request);

// In a rank, before resolve_run: makes the rank's GPU current and asks for
// data parallel in opts; other ranks than 0 print nothing on stdout.
void prepare_rank(const dist::RankEnv& env, const ParallelRequest& request, TrainOptions& opts);

// In a rank, after resolve_run: meets the other ranks (rank 0's NCCL id
// through the rendezvous) and returns this rank's collectives.
std::unique_ptr<Collectives> join_ranks(const dist::RankEnv& env);

}  // namespace tinyllama::cli
