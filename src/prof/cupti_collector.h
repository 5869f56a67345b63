#pragma once
// Records GPU activity with CUPTI's activity API: kernels (concurrent-kernel
// records, which keep kernels concurrent and name graph-launched kernels
// too), memcpy, memset, and the runtime/driver API calls whose correlation
// ids link each launch to its kernel. Records arrive in buffers CUPTI fills
// asynchronously and hands back on its own thread, so the training thread
// pays only the per-launch record cost. While a graph is captured, each
// created graph node is tagged with the op range open at that moment, so
// kernels replayed from the graph are attributed to their ops.
//
// In a build without CUDA, start() returns null and says why.
#include <memory>
#include <string>

#include "prof/activity.h"
#include "prof/host_ranges.h"

namespace tinyllama::prof {

class CuptiCollector {
 public:
  // Starts recording now (so CUPTI's one-time setup falls into the warm-up);
  // null with *why_not set when CUPTI cannot record here (no CUDA in the
  // build, or another CUPTI client such as nsys or ncu attached). ranges
  // must outlive the collector.
  static std::unique_ptr<CuptiCollector> start(const HostRangeRecorder* ranges,
                                               std::string* why_not);
  ~CuptiCollector();
  CuptiCollector(const CuptiCollector&) = delete;
  CuptiCollector& operator=(const CuptiCollector&) = delete;

  // Waits for the device and hands over the records so far (the warm-up's),
  // which the profiled steps' records then start without; graph node tags
  // are kept, since a graph captured in the warm-up replays later.
  GpuActivity take_records();
  // From now on records kernels, memcpy and memset only: no API calls, no
  // callbacks (so no more graph node tags). For eager steps whose launch
  // order is known (launch_order.h): each intercepted API call costs a
  // host-bound step far more than the kernel records do.
  void record_kernels_only();
  // Waits for the device, flushes every buffer, stops recording and returns
  // the records. With `detach`, also detaches CUPTI from the process, so
  // that the steps after the profiled ones run as fast as in a process that
  // never profiled; without, CUPTI stays attached for the counter step
  // (prof/counter_step.h), whose range profiler cannot initialise in a
  // process that has detached it (CUPTI_ERROR_NOT_INITIALIZED on an H200).
  GpuActivity finish(bool detach = true);

  struct State;

 private:
  explicit CuptiCollector(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tinyllama::prof
