#pragma once
// Which kernel each counter range stands for. The range profiler numbers
// its ranges by launch order and names no kernel, so the counter step's
// ranges are matched to the last profiled step's kernels position by
// position -- the same step, launched the same way (eager or one graph),
// runs the same kernels in the same order. The match is made only when it
// is checkable: every profiled step ran exactly as many kernels as the
// counter step gave ranges; otherwise nothing is guessed and the note says
// why.
#include <cstdint>
#include <string>
#include <vector>

#include "prof/counters.h"

namespace tinyllama::prof {

// A kernel of the profiled steps, with the op the attribution gave it.
struct ProfiledLaunch {
  std::string kernel;  // demangled
  std::string op;
  std::int64_t start_ns = 0;
};

struct CounterMatch {
  std::vector<LaunchCounters> launches;  // empty when not matched
  std::string note;                      // why not, when not matched
};

CounterMatch match_counter_ranges(std::vector<ProfiledLaunch> profiled, int steps,
                                  const std::vector<MetricValues>& ranges);

}  // namespace tinyllama::prof
