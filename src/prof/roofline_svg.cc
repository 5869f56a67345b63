#include "prof/roofline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

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

// Op labels beside their points, each where it overlaps no label placed
// before it (right, left, above or below the point), or left out: in a
// cluster of GEMMs the names would otherwise print over each other.
struct LabelPlacer {
  struct Box {
    double x0, y0, x1, y1;
  };
  std::vector<Box> boxes;
  int left_out = 0;

  static constexpr double kCharWidth = 5.0;  // 9 px sans-serif, on average
  static constexpr double kTextHeight = 9.0;

  bool free(const Box& b) const {
    return std::none_of(boxes.begin(), boxes.end(), [&](const Box& o) {
      return b.x0 < o.x1 && o.x0 < b.x1 && b.y0 < o.y1 && o.y0 < b.y1;
    });
  }

  void place(std::ostringstream& s, double x, double y, const std::string& name) {
    const double w = kCharWidth * static_cast<double>(name.size());
    struct Spot {
      double x, y;  // the text's anchor (its baseline's start, or end)
      bool end;     // text-anchor end: the text runs left of x
    };
    const Spot spots[] = {{x + 7, y + 4, false},
                          {x - 7, y + 4, true},
                          {x - w / 2, y - 8, false},
                          {x - w / 2, y + 15, false}};
    for (const Spot& spot : spots) {
      const double x0 = spot.end ? spot.x - w : spot.x;
      const Box b{x0, spot.y - kTextHeight, x0 + w, spot.y + 2};
      if (!free(b)) continue;
      boxes.push_back(b);
      s << "<text x=\"" << num(spot.x) << "\" y=\"" << num(spot.y)
        << "\" font-size=\"9\" fill=\"#333333\"" << (spot.end ? " text-anchor=\"end\"" : "") << ">"
        << svg_escape(name) << "</text>\n";
      return;
    }
    ++left_out;
  }
};

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
  LabelPlacer labels;
  for (const RooflinePoint& p : c.measured_ops) {
    point(s, a, p, "measured-op", "fill=\"#4e79a7\"", false);
    if (p.placed) labels.place(s, a.px(p.intensity), a.py(p.achieved_tflops), p.name);
  }
  for (const RooflinePoint& p : c.kernels) point(s, a, p, "kernel", "fill=\"#f28e2b\"", true);
  if (labels.left_out > 0) {
    s << "<text x=\"" << kLeft << "\" y=\"" << kHeight - 4
      << "\" font-size=\"10\" fill=\"#666666\">" << labels.left_out
      << " op labels left out where they would overlap another (each point names its op on "
         "hover; summary.json lists them all)</text>\n";
  }
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
