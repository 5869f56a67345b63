#include "bench_suite/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "prof/svg_text.h"

namespace tinyllama::suite {
namespace {

constexpr double kWidth = 720, kHeight = 420;
constexpr double kLeft = 80, kRight = 180, kTop = 50, kBottom = 90;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;
constexpr int kTicks = 5;

constexpr std::size_t kColours = 8;

// Colour-blind-safe (Okabe-Ito), cycled.
const char* colour(std::size_t i) {
  static const char* const palette[kColours] = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                                "#CC79A7", "#56B4E9", "#F0E442", "#000000"};
  return palette[i % kColours];
}

// After a lap of the palette, colours repeat: later laps draw their lines
// dashed so two series never look alike (the default bench has 10 lines).
std::string dash(std::size_t i) {
  static const char* const patterns[] = {"", "7 4", "2 3"};
  const char* p = patterns[(i / kColours) % 3];
  return *p == '\0' ? std::string() : std::string(" stroke-dasharray=\"") + p + "\"";
}

std::string num(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", v);
  return text;
}

std::string text(double x, double y, const std::string& s, const char* anchor, int size = 12,
                 const std::string& extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + std::to_string(size) +
         "\" text-anchor=\"" + anchor + "\"" + extra + ">" + prof::svg_escape(s) + "</text>\n";
}

// The value range, from 0 to the data (either side of 0), in whole ticks of
// a nice step; y() maps a value into the plot.
struct YAxis {
  double lo = 0, hi = 1, step = 0.2;
  double y(double v) const { return kTop + kPlotH * (1 - (v - lo) / (hi - lo)); }
};

YAxis y_axis(const Chart& chart) {
  double lo = 0, hi = 0;
  for (const Series& s : chart.series) {
    for (double v : s.values) {
      if (std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  if (lo == 0) return {0, nice_axis_max(hi), nice_axis_max(hi) / kTicks};
  YAxis axis;
  axis.step = nice_axis_max((hi - lo) / kTicks);
  axis.lo = std::floor(lo / axis.step) * axis.step;
  axis.hi = std::max(std::ceil(hi / axis.step), 1.0) * axis.step;
  return axis;
}

// The frame, title, axis labels, y ticks with grid lines, category labels
// and legend: everything but the data. x_of gives a category's centre.
template <typename XOf>
std::string frame(const Chart& chart, const YAxis& axis, XOf x_of) {
  std::string out = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) +
                    "\" height=\"" + num(kHeight) + "\" viewBox=\"0 0 " + num(kWidth) + " " +
                    num(kHeight) + "\" font-family=\"sans-serif\">\n";
  out += "<rect x=\"0\" y=\"0\" width=\"" + num(kWidth) + "\" height=\"" + num(kHeight) +
         "\" fill=\"white\"/>\n";
  out += text(kWidth / 2, 24, chart.title, "middle", 15, " font-weight=\"bold\"");
  const int ticks = static_cast<int>(std::lround((axis.hi - axis.lo) / axis.step));
  for (int i = 0; i <= ticks; ++i) {
    const double v = axis.lo + axis.step * i;
    const double y = axis.y(v);
    out += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(y) + "\" x2=\"" + num(kLeft + kPlotW) +
           "\" y2=\"" + num(y) + "\" stroke=\"" +
           (std::fabs(v) < 1e-12 && axis.lo < 0 ? "#888888" : "#dddddd") + "\"/>\n";
    out += text(kLeft - 6, y + 4, short_number(std::fabs(v) < 1e-12 ? 0.0 : v), "end", 11);
  }
  out += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(kLeft) +
         "\" y2=\"" + num(kTop + kPlotH) + "\" stroke=\"black\"/>\n";
  out += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(kTop + kPlotH) + "\" x2=\"" +
         num(kLeft + kPlotW) + "\" y2=\"" + num(kTop + kPlotH) + "\" stroke=\"black\"/>\n";
  // Labels wider than their slot (about 6 px a character) are slanted.
  std::size_t longest = 0;
  for (const std::string& c : chart.categories) longest = std::max(longest, c.size());
  const double slot = kPlotW * static_cast<double>(std::max<std::size_t>(chart.label_every, 1)) /
                      static_cast<double>(std::max<std::size_t>(chart.categories.size(), 1));
  const bool slanted = 6.0 * static_cast<double>(longest) > slot;
  for (std::size_t c = 0; c < chart.categories.size();
       c += std::max<std::size_t>(chart.label_every, 1)) {
    const double x = x_of(c), y = kTop + kPlotH + 16;
    out += slanted ? text(x, y, chart.categories[c], "end", 10,
                          " transform=\"rotate(-25 " + num(x) + " " + num(y) + ")\"")
                   : text(x, y, chart.categories[c], "middle", 11);
  }
  out += text(kLeft + kPlotW / 2, kHeight - 14, chart.x_label, "middle", 13);
  const double mid = kTop + kPlotH / 2;
  out +=
      text(22, mid, chart.y_label, "middle", 13, " transform=\"rotate(-90 22 " + num(mid) + ")\"");
  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    const double y = kTop + 10 + 20.0 * static_cast<double>(s);
    const double x = kLeft + kPlotW + 16;
    if (dash(s).empty()) {
      out += "<rect x=\"" + num(x) + "\" y=\"" + num(y - 9) +
             "\" width=\"12\" height=\"12\" fill=\"" + colour(s) + "\"/>\n";
    } else {  // a repeated colour: its swatch is the dashed line itself
      out += "<line x1=\"" + num(x - 2) + "\" y1=\"" + num(y - 3) + "\" x2=\"" + num(x + 14) +
             "\" y2=\"" + num(y - 3) + "\" stroke=\"" + colour(s) + "\" stroke-width=\"2.5\"" +
             dash(s) + "/>\n";
    }
    out += text(x + 18, y + 2, chart.series[s].name, "start", 11);
  }
  return out;
}

}  // namespace

std::string short_number(double v) {
  char out[32];
  const double a = std::fabs(v);
  if (a >= 1e6) {
    std::snprintf(out, sizeof out, "%.3gM", v / 1e6);
  } else if (a >= 1e4) {
    std::snprintf(out, sizeof out, "%.3gk", v / 1e3);
  } else {
    std::snprintf(out, sizeof out, "%.3g", v);
  }
  return out;
}

double nice_axis_max(double max_value) {
  if (!(max_value > 0) || !std::isfinite(max_value)) return 1;
  const double power = std::pow(10.0, std::floor(std::log10(max_value)));
  for (double step : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (step * power >= max_value * (1 - 1e-12)) return step * power;
  }
  return 10 * power;
}

std::string line_chart_svg(const Chart& chart) {
  const YAxis axis = y_axis(chart);
  const std::size_t n = chart.categories.size();
  const auto x_of = [n](std::size_t c) {
    return n <= 1
               ? kLeft + kPlotW / 2
               : kLeft + 30 + (kPlotW - 60) * static_cast<double>(c) / static_cast<double>(n - 1);
  };
  std::string out = frame(chart, axis, x_of);
  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    const std::vector<double>& values = chart.series[s].values;
    std::string points;
    int run_length = 0;  // a lone value gets its marker, no line
    const auto flush = [&] {
      if (run_length >= 2) {
        out += "<polyline fill=\"none\" stroke=\"" + std::string(colour(s)) +
               "\" stroke-width=\"2\"" + dash(s) + " points=\"" + points + "\"/>\n";
      }
      points.clear();
      run_length = 0;
    };
    for (std::size_t c = 0; c < values.size() && c < n; ++c) {
      if (!std::isfinite(values[c])) {
        flush();
        continue;
      }
      const double x = x_of(c), y = axis.y(values[c]);
      points += (points.empty() ? "" : " ") + num(x) + "," + num(y);
      ++run_length;
      if (!chart.series[s].markers) continue;
      out += "<circle cx=\"" + num(x) + "\" cy=\"" + num(y) + "\" r=\"3.5\" fill=\"" + colour(s) +
             "\"/>\n";
    }
    flush();
  }
  return out + "</svg>\n";
}

std::string bar_chart_svg(const Chart& chart) {
  const YAxis axis = y_axis(chart);
  const std::size_t n = std::max<std::size_t>(chart.categories.size(), 1);
  const double group_w = kPlotW / static_cast<double>(n);
  const auto x_of = [group_w](std::size_t c) {
    return kLeft + group_w * (static_cast<double>(c) + 0.5);
  };
  std::string out = frame(chart, axis, x_of);
  const std::size_t k = std::max<std::size_t>(chart.series.size(), 1);
  const double bar_w = group_w * 0.8 / static_cast<double>(k);
  for (std::size_t s = 0; s < chart.series.size(); ++s) {
    const std::vector<double>& values = chart.series[s].values;
    for (std::size_t c = 0; c < values.size() && c < chart.categories.size(); ++c) {
      if (!std::isfinite(values[c])) continue;
      const double x =
          kLeft + group_w * (static_cast<double>(c) + 0.1) + bar_w * static_cast<double>(s);
      // From the zero line up, or down for a negative value.
      const double zero = axis.y(0), y = axis.y(values[c]);
      const double top = std::min(zero, y);
      out += "<rect x=\"" + num(x) + "\" y=\"" + num(top) + "\" width=\"" + num(bar_w * 0.92) +
             "\" height=\"" + num(std::fabs(zero - y)) + "\" fill=\"" + colour(s) + "\"/>\n";
      out += text(x + bar_w * 0.46, values[c] < 0 ? y + 12 : y - 4, short_number(values[c]),
                  "middle", 10);
    }
  }
  return out + "</svg>\n";
}

}  // namespace tinyllama::suite
