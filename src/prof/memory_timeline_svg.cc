#include "prof/memory_timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <sstream>

#include "prof/svg_text.h"

namespace tinyllama::prof {
namespace {

constexpr double kWidth = 1000;
constexpr double kHeight = 560;
constexpr double kLeft = 80;    // room for the y labels
constexpr double kRight = 220;  // room for the legend
constexpr double kTop = 50;
constexpr double kBottom = 60;
// One colour per kind, in kActivationKinds' order, then the token ids': a
// kind keeps its colour whichever kinds a plan has.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2",
                                    "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
                                    "#9c755f", "#bab0ac", "#555555", "#d37295"};

const char* colour_of(const std::string& kind) {
  const auto* const it = std::find_if(std::begin(kActivationKinds), std::end(kActivationKinds),
                                      [&](const char* k) { return kind == k; });
  return kPalette[static_cast<std::size_t>(it - std::begin(kActivationKinds)) %
                  std::size(kPalette)];
}

// Phases narrower than this get their label along their boundary line.
constexpr double kMinLabelWidth = 70;

std::string num(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f", v);
  return text;
}

// A byte count in decimal units for an axis label: "12 MB", "1.5 GB".
std::string bytes_label(double bytes) {
  char text[32];
  if (bytes >= 1e9) {
    std::snprintf(text, sizeof text, "%.3g GB", bytes / 1e9);
  } else if (bytes >= 1e6) {
    std::snprintf(text, sizeof text, "%.3g MB", bytes / 1e6);
  } else {
    std::snprintf(text, sizeof text, "%.3g KB", bytes / 1e3);
  }
  return text;
}

// A round step for about `ticks` divisions of [0, top]: 1, 2 or 5 times a power of 10.
double tick_step(double top, int ticks) {
  const double raw = top / ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

// The plot's scales: ops along x, bytes up y.
struct Plot {
  int n_ops;
  double top;  // bytes at the top of the y axis
  double plot_w = kWidth - kLeft - kRight;
  double plot_h = kHeight - kTop - kBottom;
  double x(double op) const { return kLeft + op / n_ops * plot_w; }
  double y(double bytes) const { return kTop + plot_h - bytes / top * plot_h; }
};

// The stacked areas, bottom kind first.
void stacked_areas(std::ostringstream& svg, const Plot& p, const MemoryTimeline& tl,
                   const std::vector<std::string>& kinds) {
  std::vector<double> below(static_cast<std::size_t>(p.n_ops), 0.0);
  std::vector<std::vector<std::int64_t>> by_op;
  by_op.reserve(tl.ops.size());
  for (int i = 0; i < static_cast<int>(tl.ops.size()); ++i) by_op.push_back(tl.live_by_kind(i));
  for (std::size_t k = 0; k < kinds.size(); ++k) {
    std::ostringstream upper;
    for (int i = 0; i < static_cast<int>(by_op.size()); ++i) {
      const auto at = static_cast<std::size_t>(i);
      below[at] += static_cast<double>(by_op[at][k]);
      upper << (i == 0 ? "M" : " L") << num(p.x(i)) << ',' << num(p.y(below[at])) << " L"
            << num(p.x(i + 1)) << ',' << num(p.y(below[at]));
    }
    // Back along the previous kind's top, right to left.
    std::ostringstream back;
    for (int i = static_cast<int>(by_op.size()) - 1; i >= 0; --i) {
      const auto at = static_cast<std::size_t>(i);
      const double y0 = below[at] - static_cast<double>(by_op[at][k]);
      back << " L" << num(p.x(i + 1)) << ',' << num(p.y(y0)) << " L" << num(p.x(i)) << ','
           << num(p.y(y0));
    }
    svg << "<path d=\"" << upper.str() << back.str() << " Z\" fill=\"" << colour_of(kinds[k])
        << "\" stroke=\"none\"><title>" << svg_escape(kinds[k]) << "</title></path>\n";
  }
}

// Phase boundaries, each labelled across its phase or, when the phase is
// too narrow for that, up its boundary line.
void phase_lines(std::ostringstream& svg, const Plot& p, const MemoryTimeline& tl) {
  for (int i = 0; i < static_cast<int>(tl.ops.size()); ++i) {
    const std::string& phase = tl.ops[static_cast<std::size_t>(i)].phase;
    if (i > 0 && phase == tl.ops[static_cast<std::size_t>(i - 1)].phase) continue;
    int end = i + 1;
    while (end < static_cast<int>(tl.ops.size()) &&
           tl.ops[static_cast<std::size_t>(end)].phase == phase)
      ++end;
    svg << "<line x1=\"" << num(p.x(i)) << "\" y1=\"" << kTop << "\" x2=\"" << num(p.x(i))
        << "\" y2=\"" << kTop + p.plot_h << "\" stroke=\"#888\" stroke-dasharray=\"2,3\"/>\n";
    if (p.x(end) - p.x(i) >= kMinLabelWidth) {
      svg << "<text x=\"" << num(p.x(i) + 3) << "\" y=\"" << kTop + 12 << "\" fill=\"#555\">"
          << svg_escape(phase) << "</text>\n";
    } else {
      svg << "<text transform=\"translate(" << num(p.x(i) - 2) << ',' << kTop + 4
          << ") rotate(90)\" fill=\"#555\" font-size=\"10\">" << svg_escape(phase) << "</text>\n";
    }
  }
}

// Axes, ticks and labels.
void axes(std::ostringstream& svg, const Plot& p, const MemoryTimeline& tl) {
  const double plot_w = p.plot_w;
  const double plot_h = p.plot_h;
  svg << "<line x1=\"" << kLeft << "\" y1=\"" << kTop + plot_h << "\" x2=\"" << kLeft + plot_w
      << "\" y2=\"" << kTop + plot_h << "\" stroke=\"black\"/>\n";
  svg << "<line x1=\"" << kLeft << "\" y1=\"" << kTop << "\" x2=\"" << kLeft << "\" y2=\""
      << kTop + plot_h << "\" stroke=\"black\"/>\n";
  const double y_step = tick_step(p.top, 5);
  for (double v = 0; v <= p.top; v += y_step) {
    svg << "<line x1=\"" << kLeft - 4 << "\" y1=\"" << num(p.y(v)) << "\" x2=\"" << kLeft
        << "\" y2=\"" << num(p.y(v)) << "\" stroke=\"black\"/>\n";
    svg << "<text x=\"" << kLeft - 7 << "\" y=\"" << num(p.y(v) + 4) << "\" text-anchor=\"end\">"
        << (v == 0 ? std::string("0") : bytes_label(v)) << "</text>\n";
  }
  const double x_step = std::max(1.0, tick_step(p.n_ops, 8));
  for (double v = 0; v <= p.n_ops; v += x_step) {
    svg << "<line x1=\"" << num(p.x(v)) << "\" y1=\"" << kTop + plot_h << "\" x2=\"" << num(p.x(v))
        << "\" y2=\"" << kTop + plot_h + 4 << "\" stroke=\"black\"/>\n";
    svg << "<text x=\"" << num(p.x(v)) << "\" y=\"" << kTop + plot_h + 17
        << "\" text-anchor=\"middle\">" << static_cast<long long>(v) << "</text>\n";
  }
  svg << "<text x=\"" << kLeft + plot_w / 2 << "\" y=\"" << kHeight - 18
      << "\" text-anchor=\"middle\">op index in one training step (" << tl.ops.size()
      << " ops)</text>\n";
  svg << "<text transform=\"translate(18," << kTop + plot_h / 2
      << ") rotate(-90)\" text-anchor=\"middle\">live activation bytes</text>\n";
}

// Legend, top kind first as stacked, and the memory the plot does not show.
void legend(std::ostringstream& svg, const Plot& p, const MemoryTimeline& tl,
            const std::vector<std::string>& kinds, std::int64_t driver_used_bytes) {
  const double lx = kLeft + p.plot_w + 16;
  for (std::size_t k = kinds.size(); k-- > 0;) {
    const double ly = kTop + 8 + static_cast<double>(kinds.size() - 1 - k) * 18;
    svg << "<rect x=\"" << lx << "\" y=\"" << ly << "\" width=\"12\" height=\"12\" fill=\""
        << colour_of(kinds[k]) << "\"/>\n";
    svg << "<text x=\"" << lx + 18 << "\" y=\"" << ly + 10 << "\">" << svg_escape(kinds[k])
        << "</text>\n";
  }
  const double ny = kTop + 8 + static_cast<double>(kinds.size()) * 18 + 14;
  const MemoryBreakdown& m = tl.allocated;
  svg << "<text x=\"" << lx << "\" y=\"" << ny << "\">peak live " << bytes_label(tl.peak_live_bytes)
      << "</text>\n";
  svg << "<text x=\"" << lx << "\" y=\"" << ny + 16 << "\">not shown, held all step:</text>\n";
  svg << "<text x=\"" << lx << "\" y=\"" << ny + 32 << "\">params+grads "
      << bytes_label(static_cast<double>(m.parameters + m.gradients)) << "</text>\n";
  svg << "<text x=\"" << lx << "\" y=\"" << ny + 48 << "\">AdamW "
      << bytes_label(static_cast<double>(m.optimizer)) << ", workspaces "
      << bytes_label(static_cast<double>(m.workspaces)) << "</text>\n";
  svg << "<text x=\"" << lx << "\" y=\"" << ny + 64 << "\">"
      << (driver_used_bytes >= 0
              ? "driver: " + bytes_label(static_cast<double>(driver_used_bytes)) +
                    " in use (max sample)"
              : std::string("driver: not sampled"))
      << "</text>\n";
}

}  // namespace

std::string memory_timeline_svg(const MemoryTimeline& tl, const std::string& title,
                                std::int64_t driver_used_bytes) {
  const std::vector<std::string> kinds = tl.kinds();
  const std::int64_t tokens = tl.allocated.activations - tl.arena_bytes;
  const double reserved = static_cast<double>(tl.arena_bytes + std::max<std::int64_t>(tokens, 0));
  const Plot p{std::max(1, static_cast<int>(tl.ops.size())),
               std::max({reserved, static_cast<double>(tl.peak_live_bytes), 1.0}) * 1.08};

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
      << "\" viewBox=\"0 0 " << kWidth << ' ' << kHeight
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg << "<text x=\"" << kLeft << "\" y=\"24\" font-size=\"15\">" << svg_escape(title)
      << "</text>\n";
  stacked_areas(svg, p, tl, kinds);
  phase_lines(svg, p, tl);
  // The arena (and token ids) as allocated: the ceiling the live bytes stay under.
  svg << "<line x1=\"" << kLeft << "\" y1=\"" << num(p.y(reserved)) << "\" x2=\""
      << kLeft + p.plot_w << "\" y2=\"" << num(p.y(reserved))
      << "\" stroke=\"black\" stroke-width=\"1.5\" stroke-dasharray=\"6,4\"/>\n";
  svg << "<text x=\"" << kLeft + p.plot_w - 30 << "\" y=\"" << num(p.y(reserved) - 5)
      << "\" text-anchor=\"end\">activations allocated " << bytes_label(reserved) << "</text>\n";
  axes(svg, p, tl);
  legend(svg, p, tl, kinds, driver_used_bytes);
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace tinyllama::prof
