#include "prof/roofline.h"

#include <algorithm>
#include <cmath>

namespace tinyllama::prof {

Roofs held_clock_roofs(const std::optional<DevicePeak>& peak, Precision precision,
                       double held_mhz) {
  Roofs r;
  if (!peak) return r;
  auto at_held = [held_mhz](double tflops, double rated_mhz) {
    return held_mhz > 0 && rated_mhz > 0 ? tflops * held_mhz / rated_mhz : tflops;
  };
  r.compute_tflops = at_held(peak_tflops(*peak, precision), peak_clock_mhz(*peak, precision));
  r.fp32_tflops = at_held(peak->fp32_tflops, peak->fp32_clock_mhz);
  r.bandwidth_gbps = peak->bandwidth_gbs;
  r.sm_mhz = held_mhz;
  return r;
}

RooflinePoint place_on_roofline(const std::string& name, double flops, double bytes, double seconds,
                                const Roofs& roofs) {
  RooflinePoint p;
  p.name = name;
  p.flops = flops;
  p.bytes = bytes;
  p.seconds = seconds;
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  p.placed = positive(flops) && positive(bytes) && positive(seconds);
  if (!p.placed) return p;
  p.intensity = flops / bytes;
  p.achieved_tflops = flops / seconds / 1e12;
  if (!roofs.known()) return p;
  const double memory_roof = p.intensity * roofs.bandwidth_gbps * 1e9 / 1e12;
  p.roof_tflops = std::min(roofs.compute_tflops, memory_roof);
  p.memory_bound = p.intensity < roofs.ridge();
  p.pct_of_roof = 100.0 * p.achieved_tflops / p.roof_tflops;
  return p;
}

}  // namespace tinyllama::prof
