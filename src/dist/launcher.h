#pragma once
// `tinyllama train --gpus N`: the process becomes a launcher of N rank processes on this host,
// one per GPU, and waits for them, much as torchrun --standalone would.
#include <chrono>
#include <string>
#include <vector>

namespace tinyllama::dist {

struct LaunchSpec {
  int world = 1;
  std::vector<std::string> args;  // argv[1..] for each child (the caller removes --gpus)
  std::string executable = "/proc/self/exe";    // what each child runs
  std::chrono::milliseconds stop_grace{10000};  // SIGTERM -> SIGKILL wait when stopping ranks
  // A rank stopped (SIGSTOP, SIGTSTP) this long while another rank runs is taken as hung: the
  // running ranks wait for it in their collectives, with no timeout of their own.
  std::chrono::milliseconds stopped_limit{60000};
};

// Starts `world` children (fork + execv), each with RANK=i, WORLD_SIZE=world, LOCAL_RANK=i,
// TINYLLAMA_RENDEZVOUS_FILE=<file in a fresh mkdtemp directory>, TINYLLAMA_LAUNCHER_PID=<this
// process>, NCCL_NVLS_ENABLE=0 (always: NVLink
// multicast must stay off) added to the inherited environment; waits for all.
// Returns the exit code for the launcher: rank 0's code when every rank exited 0 or all stopped on
// the same interrupt (130 SIGINT / 143 SIGTERM: those are the ranks' own orderly interrupt exits);
// otherwise 1 after printing one line per failed rank to stderr ("rank 2 exited with code 1" /
// "rank 1 was killed by signal 9 (Killed)") and stopping the others.
//
// - A rank fails when it exits with a code other than 0/130/143, or is killed by a signal the
//   launcher did not pass on. The first failure stops the others (they are probably blocked in a
//   collective): SIGTERM, then SIGKILL after `stop_grace`; "stopping the other ranks" is printed
//   once.
// - When no rank failed but the exits differ (some ranks finished, others were interrupted) the
//   launcher returns 128 + the first signal it received itself, else the first interrupt code,
//   rank 0's first.
// - Signals: a terminal's SIGINT already reaches every rank (one process group), so the launcher
//   only notes it; a SIGTERM, or a SIGINT that a process sent to the launcher alone, is passed on
//   to every live rank; a second SIGINT or SIGTERM passes on SIGKILL. A signal sent to the whole
//   process group (kill -INT -- -PGID) looks to the launcher like one sent to it alone, so the
//   ranks get it twice: TINYLLAMA_LAUNCHER_PID (this process) lets them ignore the relayed copy
//   (train/interrupt.h). The dispositions found are restored before returning.
// - A rank that stays stopped (a job-control signal) for `stopped_limit` while another rank runs
//   fails the job: "rank 1 was stopped by signal 19 (Stopped (signal)) for 60 s while the others
//   wait for it", SIGKILL to it, and the others are stopped as above; the launcher returns 1.
//   Time the launcher spent stopped itself (a Ctrl-Z to the whole job) does not count.
// - The temporary directory is removed on every return path. Throws UsageError for world < 1 and
//   RuntimeFailure when a rank cannot be started (naming the rank and why; the ranks already
//   started are stopped first). Only one launch may run at a time in a process.
int launch_local_ranks(const LaunchSpec& spec);

}  // namespace tinyllama::dist
