#include "bench_suite/svg_chart.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <regex>
#include <string>
#include <vector>

namespace tinyllama::suite {
namespace {

// Every element closed in order: a well-formedness check of the tags (the
// CLI test parses real output with Python's XML parser as well).
bool tags_balanced(const std::string& svg) {
  std::vector<std::string> open;
  const std::regex tag("<(/?)([a-z]+)[^>]*?(/?)>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), tag); it != std::sregex_iterator();
       ++it) {
    const std::smatch& m = *it;
    if (m[3] == "/") continue;
    if (m[1] == "/") {
      if (open.empty() || open.back() != m[2]) return false;
      open.pop_back();
    } else {
      open.push_back(m[2]);
    }
  }
  return open.empty();
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

const Chart kChart{"Step <time> & memory",
                   "seq",
                   "ms",
                   {"S128", "S512", "S1024"},
                   {{"v1 fp32", {3.0, 7.5, 14.0}},
                    {"v2 fp32", {1.0, std::numeric_limits<double>::quiet_NaN(), 5.0}}}};

TEST(SvgChart, LineChartHasAPolylinePerUnbrokenRunAndAMarkerPerValue) {
  const std::string svg = line_chart_svg(kChart);
  EXPECT_TRUE(tags_balanced(svg));
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_EQ(count(svg, "<circle"), 5) << "one marker per finite value";
  EXPECT_EQ(count(svg, "<polyline"), 1) << "v2's NaN leaves two single points, no line";
  EXPECT_NE(svg.find("Step &lt;time&gt; &amp; memory"), std::string::npos) << "text is escaped";
  EXPECT_NE(svg.find(">S1024</text>"), std::string::npos);
  EXPECT_NE(svg.find(">v2 fp32</text>"), std::string::npos);
}

TEST(SvgChart, SeriesBeyondThePaletteAreDashedInTheirLinesAndLegend) {
  Chart chart{"t", "seq", "ms", {"S128", "S512"}, {}};
  for (int i = 0; i < 10; ++i)
    chart.series.push_back({"s" + std::to_string(i), {1.0 + i, 2.0 + i}});
  const std::string svg = line_chart_svg(chart);
  EXPECT_TRUE(tags_balanced(svg));
  EXPECT_EQ(count(svg, "<polyline"), 10);
  // The default bench draws 10 lines: the 9th and 10th reuse the first two
  // colours, so they (and only they) are dashed, line and legend swatch.
  EXPECT_EQ(count(svg, "stroke-dasharray"), 4) << svg;
  const std::regex dashed_line("<polyline[^>]*stroke=\"#0072B2\"[^>]*stroke-dasharray");
  EXPECT_TRUE(std::regex_search(svg, dashed_line)) << "the 9th series: the 1st colour, dashed";
}

TEST(SvgChart, BarHeightsAreProportionalToValues) {
  const Chart bars{"t", "x", "y", {"a", "b"}, {{"s", {2.0, 4.0}}}};
  const std::string svg = bar_chart_svg(bars);
  EXPECT_TRUE(tags_balanced(svg));
  const std::regex height(
      "<rect x=\"[0-9.]+\" y=\"[0-9.]+\" width=\"[0-9.]+\" height=\"([0-9.]+)\" fill=\"#0072B2\"");
  std::vector<double> heights;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), height); it != std::sregex_iterator();
       ++it) {
    heights.push_back(std::stod((*it)[1]));
  }
  // Two bars plus the legend swatch (height 12).
  ASSERT_EQ(heights.size(), 3u);
  EXPECT_NEAR(heights[2] / heights[1], 2.0, 1e-3);
}

TEST(SvgChart, NegativeBarsHangBelowTheZeroLine) {
  const Chart bars{"t", "x", "y", {"saves", "costs"}, {{"s", {3.0, -1.0}}}};
  const std::string svg = bar_chart_svg(bars);
  EXPECT_TRUE(tags_balanced(svg));
  const std::regex bar(
      "<rect x=\"[0-9.]+\" y=\"([0-9.]+)\" width=\"[0-9.]+\" height=\"([0-9.]+)\" "
      "fill=\"#0072B2\"");
  std::vector<std::pair<double, double>> rects;  // top, height
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), bar); it != std::sregex_iterator();
       ++it) {
    rects.emplace_back(std::stod((*it)[1]), std::stod((*it)[2]));
  }
  ASSERT_EQ(rects.size(), 3u);                           // the legend swatch, then the two bars
  const double zero = rects[1].first + rects[1].second;  // the positive bar ends on it
  EXPECT_NEAR(rects[2].first, zero, 1e-6) << "the negative bar starts on the zero line";
  EXPECT_NEAR(rects[1].second / rects[2].second, 3.0, 1e-3);
  EXPECT_NE(svg.find(">-1</text>"), std::string::npos) << "a tick below zero";
}

TEST(SvgChart, AxisMaximumIsTheNextNiceNumber) {
  EXPECT_DOUBLE_EQ(nice_axis_max(14.0), 20.0);
  EXPECT_DOUBLE_EQ(nice_axis_max(2.2), 2.5);
  EXPECT_DOUBLE_EQ(nice_axis_max(0.31), 0.5);
  EXPECT_DOUBLE_EQ(nice_axis_max(1000.0), 1000.0);
  EXPECT_DOUBLE_EQ(nice_axis_max(0.0), 1.0);
  EXPECT_EQ(short_number(512000), "512k");
  EXPECT_EQ(short_number(2.5), "2.5");
}

}  // namespace
}  // namespace tinyllama::suite
