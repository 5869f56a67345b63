#pragma once
// summary.json and the printed profile summary: dispatches and GPU time per
// step, top kernels, per-op FLOPs/bytes/achieved rates joined from the cost
// model, MFU, the roofline table and memory by category. The printed text is
// made from the JSON, so the two never disagree.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"
#include "model/model.h"
#include "prof/activity.h"
#include "prof/attribution.h"
#include "prof/cost_model.h"
#include "prof/gpu_clocks.h"
#include "prof/host_ranges.h"
#include "prof/kernel_stats.h"

namespace tinyllama::prof {

struct StepTimes {
  std::vector<double> profiled_ms;    // the trainer's time of each profiled step
  std::vector<double> unprofiled_ms;  // timed steps after the profiled ones (the baseline)
  double run_ms_per_step = 0;         // mean over all timed steps: the run's headline figure
};

struct MemoryFigures {
  MemoryBreakdown model;                     // workspaces included
  std::int64_t device_total_bytes = -1;      // -1: unknown (the CPU)
  std::int64_t device_used_peak_bytes = -1;  // the driver's count, sampled per step; -1: unknown
};

struct ProfileInputs {
  std::string device;   // the backend's device description
  std::string backend;  // "cpu" or "cuda"
  StepPlan plan;
  ModelConfig model;
  BatchShape shape;
  StepCost cost;
  std::vector<HostRange> ranges;     // the profiled steps' host ranges
  const GpuActivity* gpu = nullptr;  // null: no kernel statistics
  std::string gpu_note;              // why there are none (when gpu is null)
  std::string launch_order_note;     // why an eager run's profiled steps kept API records
  StepTimes times;
  MemoryFigures memory;
  const ClockReport* clocks = nullptr;  // null: not sampled (CPU backend), no "clocks" entry
};

nlohmann::json profile_summary(const ProfileInputs& in, const Attribution& attribution,
                               const std::vector<KernelStat>& stats);

// The printed summary, several lines each ending in '\n'.
std::string format_profile_summary(const nlohmann::json& summary);

// Its lines for summary.json's "clocks" (clocks_summary), each ending in
// '\n'; the first starts with label ("  clocks    "), the others are
// indented as far.
std::string format_clocks(const nlohmann::json& clocks, const std::string& label);

}  // namespace tinyllama::prof
