#pragma once
// Hardware counters of every kernel launched between start() and stop(),
// through CUPTI's range profiler (CUDA 13: cuptiRangeProfiler_* to collect,
// cuptiProfilerHost_* to configure and evaluate; no counter access of our
// own). AutoRange + KernelReplay: each kernel launch is one range, and
// CUPTI reruns the kernel (saving and restoring the memory it writes) until
// every pass of the metric set is collected. The launch is therefore slow
// and serialised, which is why the profiler collects counters in a step of
// its own, after the timed and profiled ones (prof/profiler.h).
//
// Ranges come back in launch order, unnamed (AutoRange numbers them); the
// caller matches them to kernels (counter_match.h). start() itself first
// launches an empty kernel a few times, whose ranges measure what the
// replay itself adds to a range's DRAM bytes; stop() returns them apart.
//
// A process without permission to read counters, a device without range
// profiling, a build without CUDA: start() returns null and one line why.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "prof/counters.h"

namespace tinyllama::prof {

struct CounterReadout {
  std::vector<MetricValues> ranges;  // one per kernel launch, in launch order
  std::size_t passes = 0;            // replay passes per kernel for the metric set
  std::size_t dropped_ranges = 0;    // launches past max_ranges (not counted)
  std::vector<std::string> refused;  // metric names this device refused (NaN in every range)
  // The empty kernel's counters (median of its launches; counters.h,
  // net_of_replay): what the replay itself adds to every range. NaN when
  // it could not be launched.
  MetricValues replay_baseline = no_values();
  std::size_t baseline_launches = 0;
};

class CounterCollector {
 public:
  // Profiles the current device's context from now on, for `metrics`; at
  // most max_ranges kernel launches are kept. Null with *why_not (one line)
  // when it cannot. detach_at_stop: CUPTI is detached (cuptiFinalize) when
  // this session ends; false where another session follows.
  static std::unique_ptr<CounterCollector> start(std::size_t max_ranges,
                                                 const std::vector<Metric>& metrics,
                                                 bool detach_at_stop, std::string* why_not);
  ~CounterCollector();
  CounterCollector(const CounterCollector&) = delete;
  CounterCollector& operator=(const CounterCollector&) = delete;

  // Stops, waits for the device and evaluates every range; false with
  // *why_not when CUPTI failed on the way (the readout is then empty).
  bool stop(CounterReadout* out, std::string* why_not);
  // Detaches CUPTI when this session is released after all (no other
  // session will follow it).
  void detach_when_released();

  struct State;

 private:
  explicit CounterCollector(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tinyllama::prof
