#pragma once
// One eager step's GPU work in launch order, learnt from a step whose API
// records were kept (the last warm-up step). With it the profiled steps of
// an eager run are recorded with kernel and copy records only: CUPTI's API
// records cost a host-bound eager step far more than its kernel records do
// (docs/PROFILING.md, Overhead), and the kernels' correlation ids, which
// CUPTI hands out in launch order, still say which launch came first.
// attribute() then gives the n-th record of each profiled step the op of the
// n-th launch of the learnt step, after checking every name and op matches.
#include <optional>
#include <string>
#include <vector>

#include "prof/activity.h"
#include "prof/host_ranges.h"

namespace tinyllama::prof {

// learn_launch_order's reason for a graph-replayed step: no order is needed.
inline constexpr const char* kReplaysAGraph = "the step replays a CUDA graph";

struct LaunchOrder {
  struct Launch {
    std::string name;      // the kernel's name, or the transfer's ("memcpy HtoD")
    bool kernel = true;    // a kernel, else a memcpy or memset
    int range_offset = 0;  // the launching host range's index minus its step range's index
    std::string op;        // that range's path below the step ("" for the step itself)
  };
  std::vector<Launch> launches;
};

// From the records of the warm-up, whose host ranges hold only its last
// step: that step's launches in order. nullopt, with *why_not, when the step
// cannot serve: no step was recorded, it replayed a CUDA graph (whose
// kernels find their ops by graph node anyway), or one of its records lacks
// the API call that launched it.
std::optional<LaunchOrder> learn_launch_order(const std::vector<HostRange>& ranges,
                                              const GpuActivity& gpu, std::string* why_not);

}  // namespace tinyllama::prof
