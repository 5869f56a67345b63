#pragma once
// One kernel explained, as `rocprof-compute analyze --dispatch` does: every
// counter of the kernel over the counter step, a line on what each reads
// and which limit it points at, then the derived rates and where the kernel
// sits on the roofline (train --profile --explain-kernel NAME|RANK).
#include <string>
#include <vector>

#include "prof/counters.h"
#include "prof/kernel_stats.h"
#include "prof/roofline.h"

namespace tinyllama::prof {

// The kernel --explain-kernel names: a rank ("3": the third by time in
// kernel_stats.csv) or a piece of its name (the first by time that contains
// it). -1 with *why when nothing matches.
int find_kernel(const std::vector<KernelStat>& stats, const std::string& spec, std::string* why);

struct KernelExplainInput {
  std::string name;
  int rank = 0;  // 1-based, by profiled time
  double profiled_ns_per_step = 0;
  double calls_per_step = 0;
  CounterSum counters;  // over the counter step's launches of this kernel
  Roofs roofs;
};

// Lines ending in '\n'.
std::string explain_kernel(const KernelExplainInput& in);

}  // namespace tinyllama::prof
