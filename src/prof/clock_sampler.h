#pragma once
// Samples the GPU's SM clock, power and clock event reasons on a thread of
// its own, from start() until stop(). for_gpu reads them through NVML, the
// driver's library, opened at run time (dlopen), so the binary runs where no
// driver is installed, and the report then says why there are no samples.
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "prof/gpu_clocks.h"

namespace tinyllama::prof {

// NVML refreshes power about every 20-100 ms; 10 ms samples the clock,
// which moves faster under a power cap, without a measurable cost.
inline constexpr double kClockSampleMs = 10.0;

// Takes one sample; false when the reading failed (that sample is skipped).
using ClockSource = std::function<bool(ClockSample*)>;

class ClockSampler {
 public:
  // The GPU with this PCI bus id (as cudaDeviceGetPCIBusId names it) through
  // NVML; a sampler that samples nothing, with the reason as its note, when
  // NVML or the GPU is not there.
  static std::unique_ptr<ClockSampler> for_gpu(const std::string& pci_bus_id, double interval_ms);
  // for_gpu on the current CUDA device, every kClockSampleMs.
  static std::unique_ptr<ClockSampler> for_current_gpu();

  // source every interval_ms; header: the report's fixed part (maximum
  // clock, power limit, note). Without a source nothing is sampled.
  ClockSampler(ClockSource source, ClockReport header, double interval_ms);
  ~ClockSampler();
  ClockSampler(const ClockSampler&) = delete;
  ClockSampler& operator=(const ClockSampler&) = delete;

  void start();                     // no-op without a source or when already started
  ClockReport stop();               // joins the thread; the samples so far
  const std::string& note() const;  // why nothing is sampled ("" when it is)

 private:
  void run();

  ClockSource source_;
  ClockReport report_;
  std::mutex mutex_;
  std::atomic<bool> running_{false};
  std::thread thread_;
};

}  // namespace tinyllama::prof
