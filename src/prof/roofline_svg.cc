#include "prof/roofline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "prof/svg_text.h"

namespace tinyllama::prof {
namespace {

constexpr double kWidth = 1000;
constexpr double kHeight = 640;
constexpr double kLeft = 80;
constexpr double kRight = 260;  // room for the legend
constexpr double kTop = 50;
constexpr double kBottom = 60;

std::string num(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

std::string decade_label(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

double floor_decade(double v) {
  return std::pow(10.0, std::floor(std::log10(v)));
}
double ceil_decade(double v) {
  return std::pow(10.0, std::ceil(std::log10(v)));
}

void frame(std::ostringstream& s, const RooflineChart& c, const RooflineAxes& a) {
  s << "<rect x=\"0\" y=\"0\" width=\"" << kWidth << "\" height=\"" << kHeight
    << "\" fill=\"white\"/>\n"
    << "<text x=\"" << kLeft << "\" y=\"28\" font-size=\"16\">" << svg_escape(c.title)
    << "</text>\n";
  for (double x = a.x_min; x <= a.x_max * 1.001; x *= 10) {
    s << "<line x1=\"" << num(a.px(x)) << "\" y1=\"" << kTop << "\" x2=\"" << num(a.px(x))
      << "\" y2=\"" << kHeight - kBottom << "\" stroke=\"#eeeeee\"/>\n"
      << "<text x=\"" << num(a.px(x)) << "\" y=\"" << kHeight - kBottom + 18
      << "\" font-size=\"11\" text-anchor=\"middle\">" << decade_label(x) << "</text>\n";
  }
  for (double y = a.y_min; y <= a.y_max * 1.001; y *= 10) {
    s << "<line x1=\"" << kLeft << "\" y1=\"" << num(a.py(y)) << "\" x2=\"" << kWidth - kRight
      << "\" y2=\"" << num(a.py(y)) << "\" stroke=\"#eeeeee\"/>\n"
      << "<text x=\"" << kLeft - 6 << "\" y=\"" << num(a.py(y) + 4)
      << "\" font-size=\"11\" text-anchor=\"end\">" << decade_label(y) << "</text>\n";
  }
  s << "<text x=\"" << (kLeft + kWidth - kRight) / 2 << "\" y=\"" << kHeight - 20
    << "\" font-size=\"12\" text-anchor=\"middle\">arithmetic intensity (FLOPs per DRAM "
       "byte)</text>\n"
    << "<text x=\"18\" y=\"" << (kTop + kHeight - kBottom) / 2
    << "\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 18 "
    << (kTop + kHeight - kBottom) / 2 << ")\">achieved TFLOP/s</text>\n";
}

// The attainable rate min(peak, intensity x bandwidth) from x_min to x_max;
// the memory roof's slope ends at the ridge.
void roof(std::ostringstream& s, const RooflineAxes& a, double peak_tflops, double gbps,
          const char* colour, const char* dash, const std::string& label) {
  const double ridge = peak_tflops * 1e12 / (gbps * 1e9);
  const double x0 = std::max(a.x_min, a.y_min * 1e12 / (gbps * 1e9));
  const double x_ridge = std::clamp(ridge, a.x_min, a.x_max);
  s << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\"" << dash
    << " points=\"" << num(a.px(x0)) << "," << num(a.py(x0 * gbps * 1e9 / 1e12)) << " "
    << num(a.px(x_ridge)) << "," << num(a.py(std::min(peak_tflops, x_ridge * gbps * 1e-3))) << " "
    << num(a.px(a.x_max)) << "," << num(a.py(peak_tflops)) << "\"/>\n"
    << "<text x=\"" << num(a.px(a.x_max) - 4) << "\" y=\"" << num(a.py(peak_tflops) - 6)
    << "\" font-size=\"11\" text-anchor=\"end\" fill=\"" << colour << "\">" << svg_escape(label)
    << "</text>\n";
}

void point(std::ostringstream& s, const RooflineAxes& a, const RooflinePoint& p, const char* kind,
           const char* style, bool square) {
  if (!p.placed) return;
  const std::string x = num(a.px(p.intensity));
  const std::string y = num(a.py(p.achieved_tflops));
  if (square) {
    s << "<rect data-kind=\"" << kind << "\" data-name=\"" << svg_escape(p.name) << "\" x=\""
      << num(a.px(p.intensity) - 4) << "\" y=\"" << num(a.py(p.achieved_tflops) - 4)
      << "\" width=\"8\" height=\"8\" " << style << "><title>" << svg_escape(p.name)
      << "</title></rect>\n";
    return;
  }
  s << "<circle data-kind=\"" << kind << "\" data-name=\"" << svg_escape(p.name) << "\" cx=\"" << x
    << "\" cy=\"" << y << "\" r=\"5\" " << style << "><title>" << svg_escape(p.name)
    << "</title></circle>\n";
}

void ops(std::ostringstream& s, const RooflineChart& c, const RooflineAxes& a) {
  for (const RooflinePoint& m : c.measured_ops) {
    for (const RooflinePoint& model : c.model_ops) {
      if (model.name != m.name || !model.placed || !m.placed) continue;
      s << "<line x1=\"" << num(a.px(m.intensity)) << "\" y1=\"" << num(a.py(m.achieved_tflops))
        << "\" x2=\"" << num(a.px(model.intensity)) << "\" y2=\""
        << num(a.py(model.achieved_tflops)) << "\" stroke=\"#bbbbbb\"/>\n";
    }
  }
  for (const RooflinePoint& p : c.model_ops) {
    point(s, a, p, "model-op", "fill=\"none\" stroke=\"#888888\" stroke-width=\"1.5\"", false);
  }
  for (const RooflinePoint& p : c.measured_ops) {
    point(s, a, p, "measured-op", "fill=\"#4e79a7\"", false);
    if (!p.placed) continue;
    s << "<text x=\"" << num(a.px(p.intensity) + 7) << "\" y=\"" << num(a.py(p.achieved_tflops) + 4)
      << "\" font-size=\"9\" fill=\"#333333\">" << svg_escape(p.name) << "</text>\n";
  }
  for (const RooflinePoint& p : c.kernels) point(s, a, p, "kernel", "fill=\"#f28e2b\"", true);
}

void legend(std::ostringstream& s) {
  const double x = kWidth - kRight + 20;
  s << "<circle cx=\"" << x << "\" cy=\"" << kTop + 10 << "\" r=\"5\" fill=\"#4e79a7\"/>"
    << "<text x=\"" << x + 10 << "\" y=\"" << kTop + 14
    << "\" font-size=\"11\">op, measured (counters)</text>\n"
    << "<circle cx=\"" << x << "\" cy=\"" << kTop + 30
    << "\" r=\"5\" fill=\"none\" stroke=\"#888888\"/>"
    << "<text x=\"" << x + 10 << "\" y=\"" << kTop + 34
    << "\" font-size=\"11\">op, cost model (FLOPs, min bytes)</text>\n"
    << "<rect x=\"" << x - 4 << "\" y=\"" << kTop + 46
    << "\" width=\"8\" height=\"8\" fill=\"#f28e2b\"/>"
    << "<text x=\"" << x + 10 << "\" y=\"" << kTop + 54
    << "\" font-size=\"11\">top kernel, measured</text>\n"
    << "<text x=\"" << x - 6 << "\" y=\"" << kTop + 80
    << "\" font-size=\"10\">rates over the profiled steps' time</text>\n";
}

}  // namespace

double RooflineAxes::px(double intensity) const {
  const double f = (std::log10(intensity) - std::log10(x_min)) / std::log10(x_max / x_min);
  return kLeft + f * (kWidth - kLeft - kRight);
}

double RooflineAxes::py(double tflops) const {
  const double f = (std::log10(tflops) - std::log10(y_min)) / std::log10(y_max / y_min);
  return kHeight - kBottom - f * (kHeight - kTop - kBottom);
}

RooflineAxes roofline_axes(const RooflineChart& c) {
  double x_lo = 0.1, x_hi = 100, y_lo = 0.01, y_hi = 10;
  if (c.roofs.known()) {
    x_hi = std::max(x_hi, c.roofs.ridge() * 10);
    y_hi = std::max(y_hi, c.roofs.compute_tflops * 2);
  }
  for (const auto* points : {&c.measured_ops, &c.model_ops, &c.kernels}) {
    for (const RooflinePoint& p : *points) {
      if (!p.placed) continue;
      x_lo = std::min(x_lo, p.intensity);
      x_hi = std::max(x_hi, p.intensity);
      y_lo = std::min(y_lo, p.achieved_tflops);
      y_hi = std::max(y_hi, p.achieved_tflops);
    }
  }
  return {floor_decade(x_lo), ceil_decade(x_hi * 1.01), floor_decade(y_lo),
          ceil_decade(y_hi * 1.01)};
}

std::string roofline_svg(const RooflineChart& c) {
  const RooflineAxes a = roofline_axes(c);
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
    << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\" font-family=\"sans-serif\">\n";
  frame(s, c, a);
  if (c.roofs.known()) {
    char label[96];
    std::snprintf(label, sizeof label, "compute %.0f TFLOP/s, DRAM %.0f GB/s",
                  c.roofs.compute_tflops, c.roofs.bandwidth_gbps);
    roof(s, a, c.roofs.compute_tflops, c.roofs.bandwidth_gbps, "#c0392b", "", label);
    if (c.roofs.fp32_tflops > 0) {
      std::snprintf(label, sizeof label, "fp32 %.0f TFLOP/s", c.roofs.fp32_tflops);
      roof(s, a, c.roofs.fp32_tflops, c.roofs.bandwidth_gbps, "#7f8c8d",
           " stroke-dasharray=\"6 4\"", label);
    }
  }
  ops(s, c, a);
  legend(s);
  s << "</svg>\n";
  return s.str();
}

}  // namespace tinyllama::prof
