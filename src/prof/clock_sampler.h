#pragma once
// Samples the GPU's SM clock, power and clock event reasons through NVML on
// a thread of its own, from start() until stop(). NVML is the driver's
// library: it is opened at run time (dlopen), so the binary runs where no
// driver is installed, and the report then says why there are no samples.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "prof/gpu_clocks.h"

namespace tinyllama::prof {

class ClockSampler {
 public:
  // pci_bus_id: the GPU to sample, as cudaDeviceGetPCIBusId names it.
  ClockSampler(const std::string& pci_bus_id, double interval_ms);
  ~ClockSampler();
  ClockSampler(const ClockSampler&) = delete;
  ClockSampler& operator=(const ClockSampler&) = delete;

  void start();                     // no-op when NVML is not there or already started
  ClockReport stop();               // joins the thread; the samples so far
  const std::string& note() const;  // why nothing is sampled ("" when it is)

 private:
  struct Nvml;
  void run();

  std::unique_ptr<Nvml> nvml_;
  ClockReport report_;
  std::mutex mutex_;
  std::atomic<bool> running_{false};
  std::thread thread_;
};

}  // namespace tinyllama::prof
