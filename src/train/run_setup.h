#pragma once
// Turning what a command asked for into a run that can start, for every
// subcommand alike: the options checked (one line and exit 2 for a bad
// value), the device chosen, the plan resolved for that device and these
// shapes (model/step_plan.h), and the memory the plan needs checked against
// what the device has -- all before anything is allocated.
#include <string>
#include <vector>

#include "model/collectives.h"
#include "train/options.h"

namespace tinyllama {

// Fills opts.plan (with --resume and attention=auto, from the newest
// checkpoint's attention choice instead of a new timing). Returns the notes a front end should
// print (e.g. no CUDA device found, running on the cpu). Throws UsageError for bad options and
// RuntimeFailure for a device that is missing or a run that cannot fit.
std::vector<std::string> resolve_run(TrainOptions& opts);

// Data parallel, once the ranks have met: each rank timed attention=auto on
// its own GPU in resolve_run, and a near tie may fall either way; every rank
// takes rank 0's choice (re-resolving its plan where it differs), so the
// ranks run alike and a run resumed from rank 0's checkpoint runs what each
// of them ran. A no-op without attention=auto or on one rank.
void adopt_rank0_attention(TrainOptions& opts, Collectives& comm);

}  // namespace tinyllama
