#pragma once
// Per-kernel statistics over the profiled steps, in the columns rocprofv3
// `--stats` users know: Name, Calls, TotalDurationNs, AverageNs, Percentage,
// MinNs, MaxNs, sorted by total time.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "prof/activity.h"
#include "prof/counters.h"

namespace tinyllama::prof {

struct KernelStat {
  std::string name;  // demangled
  std::int64_t calls = 0;
  std::int64_t total_ns = 0;
  std::int64_t min_ns = 0;
  std::int64_t max_ns = 0;
  double percentage = 0;  // of all kernels' total time
  double average_ns() const {
    return calls > 0 ? static_cast<double>(total_ns) / static_cast<double>(calls) : 0.0;
  }
};

// C++ kernel names readable ("void add<float>(float*, int)"); anything that
// is not a mangled name (cuBLAS's "sm90_xmma_gemm_...") comes back as is.
std::string demangle(const std::string& name);

// One row per kernel name (after demangling), largest total first; ties by name.
std::vector<KernelStat> kernel_stats(const std::vector<KernelRecord>& kernels);

// The CSV text: a header row, then one row per kernel; names are quoted.
// With counters (the counter step's sums per kernel name, counters.h), the
// rocprofv3 columns are followed by the counter columns: bytes and counts of
// one step, rates over the kernel's profiled time per step (total / steps);
// a kernel without counters leaves them empty.
std::string kernel_stats_csv(const std::vector<KernelStat>& stats,
                             const std::map<std::string, CounterSum>* counters = nullptr,
                             double steps = 1);

// counter_launches.csv: one row per launch of the counter step, in launch
// order, with the op that launched it and every metric (counters.h's
// labels): the per-dispatch view of rocprof-compute's --dispatch, and what
// a tool matches launch by launch (scripts/counters_vs_ncu.py against ncu).
std::string counter_launches_csv(const std::vector<LaunchCounters>& launches);

}  // namespace tinyllama::prof
