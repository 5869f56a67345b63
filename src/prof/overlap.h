#pragma once
// Kernels side by side on the GPU's timeline: how much of a kernel's run
// had another stream's kernels running beside it. A captured step's
// parallel branches (the weight-gradient GEMMs, the per-layer AdamW sweeps,
// the collectives) run on streams of their own, so this is the share of an
// op's time spent sharing the GPU -- where a kernel runs slower than alone
// because another one takes SMs and bandwidth, or where its time is hidden
// behind the main stream's work.
//
// Kernels on one stream never count for each other: a kernel launched with
// programmatic dependent launch (--kernel-launch pdl) starts while the one
// before it on its stream runs and waits for it, which is not work beside
// it. The figures come from the records alone and are tested with
// hand-built records.
#include <cstdint>
#include <vector>

#include "prof/activity.h"

namespace tinyllama::prof {

// Per kernel: the nanoseconds of its run [start, end) during which at least
// one kernel ran on another stream of the same device (counted once however
// many did). Only kernels with `counts[i]` count as such work, and only
// kernels with `wanted[i]` get a figure (0 for the others); an empty vector
// means every kernel.
std::vector<std::int64_t> time_beside_other_streams(const std::vector<KernelRecord>& kernels,
                                                    const std::vector<bool>& counts = {},
                                                    const std::vector<bool>& wanted = {});

}  // namespace tinyllama::prof
