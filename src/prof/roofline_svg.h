#pragma once
// The measured roofline as an SVG (the workshop's rocprof-compute roofline
// plot): log-log, FLOPs per DRAM byte across, TFLOP/s up; the memory roof,
// the precision's compute roof and the fp32 roof at the clock held; each op
// (summed over layers) as measured by the counters, beside it the cost
// model's placement of the same op joined by a thin line, and the top
// kernels. Every point carries data-kind and data-name, so tests and
// scripts find it.
#include <string>
#include <vector>

#include "prof/roofline.h"

namespace tinyllama::prof {

struct RooflineChart {
  std::string title;
  Roofs roofs;
  std::vector<RooflinePoint> measured_ops;  // counters
  std::vector<RooflinePoint> model_ops;     // the cost model, same names as measured_ops
  std::vector<RooflinePoint> kernels;       // counters, the top kernels
};

// Decades on both axes, wide enough for every placed point and the ridge.
struct RooflineAxes {
  double x_min = 0.01, x_max = 1e4;   // FLOPs per byte
  double y_min = 1e-3, y_max = 1e4;   // TFLOP/s
  double px(double intensity) const;  // SVG x of an intensity
  double py(double tflops) const;     // SVG y of a rate
};

RooflineAxes roofline_axes(const RooflineChart& chart);
std::string roofline_svg(const RooflineChart& chart);

}  // namespace tinyllama::prof
