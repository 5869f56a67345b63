#include "bench_suite/plots.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace tinyllama::suite {
namespace {

PointResult point(const std::string& level, int seq, double ms, double peer_peak) {
  PointResult r;
  r.point = {level, "fp32", 2, seq, {}};
  r.model = "m";
  r.ok = true;
  r.ms_per_step = ms;
  r.tokens_per_s = 2 * seq / (ms / 1e3);
  r.peak_mb = seq / 8.0;
  r.peers.push_back({"eager", true, "", ms * 1.5, peer_peak});
  return r;
}

std::string plot(const std::vector<NamedSvg>& plots, const std::string& file) {
  for (const NamedSvg& p : plots) {
    if (p.file == file) return p.svg;
  }
  return "";
}

TEST(BenchPlots, OneChartPerQuestionWithASeriesPerLevelAndPeer) {
  BenchReport report;
  const double none = std::numeric_limits<double>::quiet_NaN();
  report.points = {point("v1", 8, 4.0, none), point("v1", 16, 6.0, none), point("v2", 8, 2.0, none),
                   point("v2", 16, 3.0, none)};
  const std::vector<NamedSvg> plots = bench_plots(report);
  ASSERT_EQ(plots.size(), 4u);
  const std::string time = plot(plots, "time_vs_seq.svg");
  EXPECT_NE(time.find(">v1 fp32</text>"), std::string::npos);
  EXPECT_NE(time.find(">torch eager fp32</text>"), std::string::npos);
  // The peer has no memory figure on the CPU: no empty series in the legend.
  EXPECT_EQ(plot(plots, "memory_vs_seq.svg").find("torch eager"), std::string::npos);
  // v2 twice as fast as v1 at both lengths: speed-up bars labelled 2.
  const std::string speedup = plot(plots, "speedup_per_level.svg");
  EXPECT_NE(speedup.find(">Speed-up per level over v1 (B2)</text>"), std::string::npos);
  const std::string bar_label = "font-size=\"10\" text-anchor=\"middle\">";
  EXPECT_NE(speedup.find(bar_label + "2</text>"), std::string::npos) << speedup;
  EXPECT_NE(speedup.find(bar_label + "1</text>"), std::string::npos) << "v1 over itself";
}

}  // namespace
}  // namespace tinyllama::suite
