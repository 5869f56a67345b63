#pragma once
// The counter steps (issue 44): one step after the profiled ones, run under
// CUPTI's range profiler (counter_collector.h), and where another step
// follows, the DRAM pass (counters.h, dram_pass_metrics) in that one. Their
// kernels are replayed once per pass, so their time is neither a profiled
// nor a baseline time; the profiled steps' timing columns stay those of
// unperturbed steps, and the counters join them kernel by kernel
// (counter_match.h).
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
  // At the launch of a step after the profiled ones: true when this is a
  // counter step (the first such step, then the DRAM pass in the next; the
  // range profiler is on from now, unless it cannot start, which the
  // summary then says).
  bool begin(std::size_t kernels_per_step_hint);
  // After the step's launch: stops the range profiler (waits for the device).
  void end_launch();
  // When a step after the profiled ones has finished: true when it was a
  // counter step (the first one's time kept).
  bool end_step(double step_ms);

  // The section's inputs: the ranges matched to the profiled steps' kernels.
  CounterInputs inputs(const GpuActivity* gpu, const Attribution& attribution, int steps) const;

 private:
  const bool wanted_;
  int begun_ = 0;          // counter steps begun: 1 the counters, 2 the DRAM pass too
  bool launched_ = false;  // launched and not yet finished
  std::unique_ptr<CounterCollector> collector_;
  CounterReadout readout_;       // the first step's
  CounterReadout dram_readout_;  // the DRAM pass's
  std::string unavailable_;
  std::string dram_note_;  // why the DRAM pass gave nothing, when it did not
  double step_ms_ = 0;
};

}  // namespace tinyllama::prof
