#pragma once
// `train --profile`: records the first N timed steps (host op ranges always;
// kernels, memcpy/memset and launches through CUPTI on a GPU) and writes
// kernel_stats.csv, trace.json and summary.json into the profile directory.
//
// The trainer's whole involvement is four calls: construct (before the
// warm-up, so CUPTI's one-time setup and any graph capture happen under
// it), begin_step/end_step around every step, and finish. Steps after the
// profiled ones run with the profiler detached: they are the baseline its
// overhead is measured against.
#include <memory>
#include <string>
#include <vector>

#include "model/backend.h"
#include "model/model.h"
#include "prof/activity.h"
#include "prof/cupti_collector.h"
#include "prof/host_ranges.h"
#include "train/options.h"
#include "train/trainer.h"

namespace tinyllama::prof {

class Profiler {
 public:
  // Creates the profile directory (RuntimeFailure if it cannot).
  Profiler(const TrainOptions& opts, const Model& model, Backend& backend);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Around each step's work (warm-up steps too: timed = false).
  void begin_step(bool timed);
  void end_step(bool timed, double step_ms);

  // Writes the files and returns the printed summary (lines ending in '\n').
  std::string finish(const TrainSummary& summary);

 private:
  void stop_recording();

  const TrainOptions opts_;  // a copy: small, and no lifetime to reason about
  const Model& model_;
  Backend& backend_;
  HostRangeRecorder recorder_;
  std::unique_ptr<CuptiCollector> collector_;
  std::string collector_note_;  // why there is no collector
  GpuActivity activity_;
  bool recording_ = true;  // the recorder is attached to the op markers
  bool window_started_ = false;
  int step_range_ = -1;
  std::vector<double> profiled_ms_;
  std::vector<double> unprofiled_ms_;
};

}  // namespace tinyllama::prof
