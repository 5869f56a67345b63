#pragma once
// `train --profile`: records the first N timed steps (host op ranges always;
// kernels, memcpy/memset and launches through CUPTI on a GPU) and writes
// kernel_stats.csv, trace.json and summary.json into the profile directory.
//
// The trainer's whole involvement: construct (before the warm-up, so
// CUPTI's one-time setup and any graph capture happen under it),
// begin_step/end_launch around the host's launch of every step, end_step
// when the step has finished on the device (later: the trainer enqueues
// ahead), and finish. Steps after the profiled ones run with the profiler
// detached: they are the baseline its overhead is measured against. The
// trainer lets no baseline step start before the last profiled one has
// finished, so CUPTI is off while they run.
//
// With counters (--profile-counters), the first step after the profiled
// ones is the counter step (counter_step.h): its kernels replay under
// CUPTI's range profiler, and its time counts as neither profiled nor
// baseline. window_steps() tells the trainer how many steps, counted from
// the first timed one, are not baseline steps.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/backend.h"
#include "model/model.h"
#include "prof/activity.h"
#include "prof/counter_step.h"
#include "prof/cupti_collector.h"
#include "prof/gpu_clocks.h"
#include "prof/host_ranges.h"
#include "prof/kernel_stats.h"
#include "prof/launch_order.h"
#include "prof/profile_summary.h"

namespace tinyllama::prof {

// What --profile was asked for (the trainer fills it from its options).
struct ProfileSettings {
  std::string dir = "profile";  // --profile-dir
  int steps = 5;                // --profile-steps: the first timed steps
  int warmup_steps = 0;         // the run's untimed steps before them
  bool api_calls = false;       // --profile-api-calls
  bool counters = false;        // --profile-counters: hardware counters in a step of their own
  std::string explain_kernel;   // --explain-kernel NAME|RANK (implies counters)
};

// The run's figures the summary puts beside the profiled steps.
struct RunFigures {
  double ms_per_step = 0;          // mean over all timed steps
  double device_used_peak_mb = 0;  // the driver's count; 0 when unknown
  // The SM clock and power over the timed steps (the trainer samples them
  // for every CUDA run); null on the CPU backend.
  const ClockReport* clocks = nullptr;
};

class Profiler {
 public:
  // Creates the profile directory (RuntimeFailure if it cannot). The model
  // gives the plan, shapes and memory the summary reports.
  Profiler(const ProfileSettings& settings, const Model& model, Backend& backend);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Around the launch of each step's work (warm-up steps too: timed =
  // false). begin_step returns whether the step is one of the profiled ones.
  bool begin_step(bool timed);
  void end_launch();
  // When the step has finished, with what begin_step said and its time.
  void end_step(bool timed, bool profiled, double step_ms);

  // Writes the files and returns the printed summary (lines ending in '\n').
  std::string finish(const RunFigures& run);

  // Timed steps that are not baseline steps: the profiled ones and the
  // counter step.
  int window_steps() const { return settings_.steps + (counter_step_.wanted() ? 1 : 0); }

 private:
  void stop_recording();   // no more host ranges or NVTX
  void stop_collecting();  // CUPTI off, its records kept
  // At the first profiled step: drops the warm-up's records after learning
  // an eager step's launch order from its last step and, if it can, drops
  // CUPTI's API records from then on.
  void open_window();
  // The counter section, the roofline and the --explain-kernel text, added
  // to the summary; returns the printed lines and notes the files written.
  std::string finish_counters(const ProfileInputs& in, const Attribution& attribution,
                              const std::vector<KernelStat>& stats, nlohmann::json& summary,
                              std::string& written);

  const ProfileSettings settings_;
  const Model& model_;
  Backend& backend_;
  HostRangeRecorder recorder_;
  std::unique_ptr<CuptiCollector> collector_;
  std::string collector_note_;  // why there is no collector
  GpuActivity activity_;
  bool recording_ = true;   // the recorder is attached to the op markers
  bool collected_ = false;  // CUPTI's records are in activity_
  bool window_started_ = false;
  std::optional<LaunchOrder> launch_order_;  // set when the profiled steps lack API records
  std::string launch_order_note_;            // why an eager run kept its API records
  int step_range_ = -1;
  int launched_profiled_ = 0;
  std::vector<double> profiled_ms_;
  std::vector<double> unprofiled_ms_;
  CounterStep counter_step_;
};

}  // namespace tinyllama::prof
