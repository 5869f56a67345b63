#pragma once
// How the GEMM autotune (cuda_gemm.h) times one candidate: the median of
// kGemmTimings timings, of one launch each or of one replay of a graph of
// launches back to back (as a captured step runs them). At the workshop's
// sizes a GEMM takes 4-12 us and one launch at a time between events costs
// as much overhead, so the choice among close candidates was mostly noise
// (docs/log/2026-11-27.md, third session).
#include <cuda_runtime.h>

#include <functional>

#include "model/backend.h"

namespace tinyllama::cuda {

// The marks an EventTimer needs for either timing.
int gemm_timing_marks();

// `launch` enqueues one launch on `stream` and says whether it was taken.
// Both return the median time of one launch in ms, or -1 when a launch (or
// the graph's capture) was refused; no sticky error is left behind.
float time_launches_one_by_one(const std::function<bool()>& launch, cudaStream_t stream,
                               EventTimer& timer);
float time_launches_in_graph(const std::function<bool()>& launch, cudaStream_t stream,
                             EventTimer& timer);

}  // namespace tinyllama::cuda
