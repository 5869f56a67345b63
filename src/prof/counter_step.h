#pragma once
// The counter step (issue 44): one step after the profiled ones, run under
// CUPTI's range profiler (counter_collector.h). Its kernels are replayed
// once per pass, so its time is neither a profiled nor a baseline time; the
// profiled steps' timing columns stay those of unperturbed steps, and the
// counters join them kernel by kernel (counter_match.h).
#include <cstddef>
#include <memory>
#include <string>

#include "prof/activity.h"
#include "prof/attribution.h"
#include "prof/counter_collector.h"
#include "prof/counter_summary.h"

namespace tinyllama::prof {

class CounterStep {
 public:
  explicit CounterStep(bool wanted) : wanted_(wanted) {}

  bool wanted() const { return wanted_; }
  // At the launch of a step after the profiled ones: true when this is the
  // counter step (the first such step; the range profiler is on from now,
  // unless it cannot start, which the summary then says).
  bool begin(std::size_t kernels_per_step_hint);
  // After the step's launch: stops the range profiler (waits for the device).
  void end_launch();
  // When a step after the profiled ones has finished: true (and its time
  // kept) when it was the counter step.
  bool end_step(double step_ms);

  // The section's inputs: the ranges matched to the profiled steps' kernels.
  CounterInputs inputs(const GpuActivity* gpu, const Attribution& attribution, int steps) const;

 private:
  const bool wanted_;
  bool begun_ = false;
  bool launched_ = false;  // launched and not yet finished
  std::unique_ptr<CounterCollector> collector_;
  CounterReadout readout_;
  std::string unavailable_;
  double step_ms_ = 0;
};

}  // namespace tinyllama::prof
