#include "bench_suite/compare.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace tinyllama::suite {
namespace {

// A GPU profile summary as src/prof/profile_summary.cc writes it (the keys
// compare reads), with four top kernels of which compare keeps three.
nlohmann::json gpu_summary(double dispatches) {
  nlohmann::json top = nlohmann::json::array();
  const char* names[] = {"adamw_fused_kernel", "nvjet_sm90_tst_64x64", "flash_fwd|kernel",
                         "rmsnorm_backward_kernel"};
  for (int i = 0; i < 4; ++i) {
    top.push_back({{"name", names[i]},
                   {"calls", 10 * (i + 1)},
                   {"calls_per_step", 1.0 + i},
                   {"total_ns", 1000000 / (i + 1)},
                   {"ms_per_step", 0.3 / (i + 1)},
                   {"share_pct", 19.0 / (i + 1)}});
  }
  return {
      {"kernel_statistics", true},
      {"gpu",
       {{"kernel_dispatches_per_step", dispatches}, {"unique_kernels", 30}, {"top_kernels", top}}},
      {"notes", nlohmann::json::array({"op GPU times sum the kernels"})}};
}

PointResult level_point(const std::string& level, double ms, const ChoiceSwitch& variant = {}) {
  PointResult r;
  r.point = {level, "bf16", 8, 128, variant};
  r.model = "D512 L8 H8 K4 F2048 vocab 1000";
  r.ok = true;
  r.ms_per_step = ms;
  r.tokens_per_s = 1024 / (ms / 1e3);
  r.peak_mb = 400;
  return r;
}

TEST(CompareReport, ReadsTheKernelFiguresOfAGpuProfile) {
  const ProfileFigures p = read_profile_summary(gpu_summary(251), 123456);
  ASSERT_TRUE(p.ok);
  ASSERT_TRUE(p.has_kernels);
  EXPECT_DOUBLE_EQ(p.dispatches_per_step, 251);
  EXPECT_EQ(p.unique_kernels, 30);
  ASSERT_EQ(p.top.size(), 3u);
  EXPECT_EQ(p.top[0].name, "adamw_fused_kernel");
  EXPECT_DOUBLE_EQ(p.top[2].share_pct, 19.0 / 3);
  EXPECT_EQ(p.trace_bytes, 123456);
}

TEST(CompareReport, ACpuProfileHasNoKernelFiguresAndSaysWhy) {
  const nlohmann::json cpu = {
      {"kernel_statistics", false}, {"gpu", nullptr}, {"notes", {"kernel statistics need a GPU"}}};
  const ProfileFigures p = read_profile_summary(cpu, 10);
  EXPECT_TRUE(p.ok);
  EXPECT_FALSE(p.has_kernels);
  EXPECT_EQ(p.note, "no kernel records: kernel statistics need a GPU");
  EXPECT_TRUE(p.top.empty());
}

TEST(CompareReport, MarkdownAndJsonCarryEveryLevelsFiguresAndTheFusionEffects) {
  CompareReport report;
  report.levels = {"v1", "v2"};
  report.runs.model = "D512 L8 H8 K4 F2048 vocab 1000";
  report.runs.points = {level_point("v1", 4.0), level_point("v2", 1.6),
                        level_point("v2", 2.0, {"cuda_graphs off", {"--disable-cuda-graphs"}})};
  report.profiles = {read_profile_summary(gpu_summary(517), 2000000),
                     read_profile_summary(gpu_summary(251), 1000000)};
  EXPECT_EQ(to_markdown(report).find("SM clock"), std::string::npos) << "no clock, no row";
  report.runs.points[0].sm_mhz = 1980;
  report.runs.points[0].power_capped_pct = 0;
  report.runs.points[1].sm_mhz = 1755;
  report.runs.points[1].power_capped_pct = 100;
  const std::string md = to_markdown(report);
  EXPECT_NE(md.find("| SM clock (power-capped share) | 1980 MHz (0 %) | 1755 MHz (100 %) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| ms/step | 4.000 | 1.600 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| speed-up over v1 | 1.00x | 2.50x |"), std::string::npos) << md;
  EXPECT_NE(md.find("| kernel dispatches per step | 517 | 251 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| top kernel 3 | `flash_fwd\\|kernel` 6.3 % (0.100 ms) |"), std::string::npos)
      << "a '|' in a kernel name is escaped: " << md;
  EXPECT_NE(md.find("| trace size | 2.00 MB | 1.00 MB |"), std::string::npos) << md;
  EXPECT_NE(md.find("| v2 bf16 B8 S128 | cuda_graphs off | 2.000 | 1.600 | +0.400 | +25.0 % |"),
            std::string::npos)
      << md;
  const nlohmann::json j = to_json(report);
  EXPECT_EQ(j["tool"], "tinyllama compare");
  EXPECT_EQ(j["levels"][1]["profile"]["kernel_dispatches_per_step"], 251.0);
  EXPECT_DOUBLE_EQ(j["fusion_effects"][0]["effect_ms"].get<double>(), 0.4);
  const std::vector<NamedSvg> plots = compare_plots(report);
  ASSERT_EQ(plots.size(), 4u) << "ms, memory, dispatches, fusion effects";
  EXPECT_EQ(plots[2].file, "compare_dispatches.svg");
}

}  // namespace
}  // namespace tinyllama::suite
