#pragma once
// Places work on the roofline: its arithmetic intensity (FLOPs per DRAM
// byte), the rate it achieved, the roof above it and which roof binds. One
// function for the measured points (counter FLOPs and DRAM bytes) and the
// cost model's (its FLOPs and minimal bytes), so the two are placed alike.
#include <optional>
#include <string>

#include "model/config.h"
#include "prof/device_peaks.h"

namespace tinyllama::prof {

struct Roofs {
  double compute_tflops = 0;  // the precision's dense peak at the clock held
  double fp32_tflops = 0;     // CUDA-core fp32 at the same clock (drawn, not binding)
  double bandwidth_gbps = 0;  // device memory, GB/s
  double sm_mhz = 0;          // the clock the compute roofs are scaled to; 0: the datasheet's

  bool known() const { return compute_tflops > 0 && bandwidth_gbps > 0; }
  // FLOPs per byte where the memory roof meets the compute roof.
  double ridge() const { return compute_tflops * 1e12 / (bandwidth_gbps * 1e9); }
};

// The roofs at the SM clock the GPU held (held_mhz; 0: not sampled, the
// datasheet's): compute peaks scale with the clock, as the MFU line's do;
// the memory roof does not. Unknown (zero) without a peak for the device.
Roofs held_clock_roofs(const std::optional<DevicePeak>& peak, Precision precision, double held_mhz);

struct RooflinePoint {
  std::string name;
  double flops = 0;
  double bytes = 0;
  double seconds = 0;
  double intensity = 0;        // flops / bytes; 0 without bytes
  double achieved_tflops = 0;  // flops / seconds
  double roof_tflops = 0;      // min(compute, intensity x bandwidth): the attainable rate
  bool memory_bound = false;   // left of the ridge: the memory roof is the one above it
  double pct_of_roof = 0;      // achieved / roof x 100
  bool placed = false;         // flops, bytes and time all known and positive
};

RooflinePoint place_on_roofline(const std::string& name, double flops, double bytes, double seconds,
                                const Roofs& roofs);

}  // namespace tinyllama::prof
