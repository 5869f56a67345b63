#pragma once
// Where a measured op sits against the device's roofline. The op's FLOPs
// and bytes come from the cost model (bench/op_cost.h), the peaks from
// prof/device_peaks.h.
#include <cstdint>

namespace tinyllama::bench {

// Peak rates of the device at the run's precision; 0 when unknown (a GPU
// not in the peak table gets no roofline rather than a guessed one).
struct Roof {
  double tflops = 0;         // dense peak for the compute dtype
  double bandwidth_gbs = 0;  // device memory, GB/s (1e9 bytes)
  bool known() const { return tflops > 0 && bandwidth_gbs > 0; }
};

struct Rates {
  double gbs = 0;     // bytes / time
  double tflops = 0;  // FLOPs / time
  // Time the op would take at the roof: the larger of its FLOPs at the
  // peak rate and its bytes at the peak bandwidth; NaN when the roof is
  // unknown.
  double roof_us = 0;
  // roof_us / measured time, in percent: 100 means the op runs at the
  // roof. Above 100 means it moved its bytes faster than device memory
  // can, i.e. from the L2 cache (small shapes, repeated back to back).
  double pct_of_roof = 0;
};

Rates rates(std::int64_t flops, std::int64_t bytes, double time_us, const Roof& roof);

}  // namespace tinyllama::bench
