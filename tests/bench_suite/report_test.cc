#include "bench_suite/report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "bench_suite/results.h"
#include "core/errors.h"

namespace tinyllama::suite {
namespace {

PointResult ok_point(const std::string& level, double ms, double peak) {
  PointResult r;
  r.point = {level, "bf16", 8, 128, {}};
  r.model = "D64 L2 H4 K2 F256 vocab 100";
  r.ok = true;
  r.ms_per_step = ms;
  r.median_ms_per_step = ms * 0.98;
  r.tokens_per_s = 8 * 128 / (ms / 1e3);
  r.samples_per_s = 8 / (ms / 1e3);
  r.peak_mb = peak;
  r.final_loss = 4.25;
  r.kernel_launches_per_step = level == "v1" ? 517 : 251;
  if (level == "v2") {
    r.sm_mhz = 1710;
    r.power_capped_pct = 87.5;
  }
  return r;
}

BenchReport sample_report() {
  BenchReport report;
  report.environment = {{"gpu", "Test GPU"}, {"commit", "abc123"}};
  report.device = "cuda";
  report.model = "D64 L2 H4 K2 F256 vocab 100";
  report.num_steps = 7;
  report.warmup_steps = 3;
  report.points.push_back(ok_point("v1", 6.0, 300.5));
  PointResult v2 = ok_point("v2", 2.0, 250.25);
  v2.peers.push_back({"compile", true, "", 3.0, 280.0});
  v2.peers.push_back({"eager", false, "out of memory", 0, 0});
  report.points.push_back(v2);
  PointResult failed;
  failed.point = {"v3", "bf16", 8, 128, {"norm plain", {"--norm", "plain"}}};
  failed.model = report.model;
  failed.error = "out of device memory, with a comma";
  report.points.push_back(failed);
  return report;
}

TEST(BenchReport, JsonRoundTripsEveryField) {
  const BenchReport report = sample_report();
  const nlohmann::json j = to_json(report);
  for (const char* key : {"tool", "environment", "device", "model", "num_steps", "points"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_TRUE(j["points"][2]["ms_per_step"].is_null()) << "a failed point has no figures";
  const BenchReport back = report_from_json(nlohmann::json::parse(j.dump()));
  EXPECT_EQ(to_json(back), j);
  ASSERT_EQ(back.points.size(), 3u);
  EXPECT_EQ(back.points[1].match_key(), report.points[1].match_key());
  EXPECT_DOUBLE_EQ(back.points[1].peer("compile")->ms_per_step, 3.0);
  EXPECT_EQ(back.points[1].sm_mhz, 1710.0);
  EXPECT_EQ(back.points[1].power_capped_pct, 87.5);
  EXPECT_FALSE(back.points[0].sm_mhz.has_value()) << "no clock stays no clock";
  EXPECT_TRUE(j["points"][0]["sm_mhz_median"].is_null());
  EXPECT_EQ(back.points[2].point.variant.train_args, (std::vector<std::string>{"--norm", "plain"}));
}

TEST(BenchReport, RefusesAJsonThatIsNoBenchReport) {
  EXPECT_THROW(report_from_json(nlohmann::json{{"ms_per_step", 2.0}}), RuntimeFailure);
  nlohmann::json broken = to_json(sample_report());
  broken.erase("points");
  EXPECT_THROW(report_from_json(broken), RuntimeFailure);
}

TEST(BenchReport, CsvHasAHeaderAndOneRowPerPoint) {
  const std::string csv = to_csv(sample_report());
  std::istringstream in(csv);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[0].find("peer_compile_ms"), std::string::npos);
  EXPECT_EQ(lines[2].rfind("v2 bf16 B8 S128,", 0), 0u) << lines[2];
  EXPECT_NE(lines[2].find(",2.0000,"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find(",3.0000,280.0,"), std::string::npos) << "the peer's columns";
  EXPECT_NE(lines[0].find(",final_loss,sm_mhz_median,power_capped_pct,"), std::string::npos);
  EXPECT_NE(lines[2].find(",4.25000,1710,87.5,"), std::string::npos) << lines[2];
  EXPECT_NE(lines[1].find(",4.25000,,,"), std::string::npos) << "no clock: empty " << lines[1];
  EXPECT_NE(lines[3].find("\"out of device memory, with a comma\""), std::string::npos)
      << "a field with a comma is quoted: " << lines[3];
}

TEST(BenchReport, MarkdownCellsEscapePipesAndCutLongText) {
  EXPECT_EQ(markdown_cell("a|b\nc"), "a\\|b c");
  EXPECT_EQ(markdown_cell("abcdefgh", 5), "abcde...");
  EXPECT_EQ(markdown_cell("abcde", 5), "abcde");
  BenchReport report = sample_report();
  report.points[2].error = "bad | value";
  EXPECT_NE(to_markdown(report).find("failed: bad \\| value |"), std::string::npos);
}

TEST(BenchReport, MarkdownShowsSpeedupsOverFirstLevelAndPeer) {
  const std::string md = to_markdown(sample_report());
  EXPECT_NE(md.find("| gpu | Test GPU |"), std::string::npos);
  // v2 at 2 ms against v1 at 6 ms, and its median 1.96 ms against the peer's 3 ms.
  EXPECT_NE(md.find("| v2 bf16 B8 S128 | 2.000 | 1.960 | 512000 | 250.2 | 251 | 1710 MHz, capped "
                    "88 % | 3.00x | 3.000 | 280.0 | 1.53x | failed | | "),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("failed: out of device memory"), std::string::npos);
  EXPECT_NE(md.find("| v1 bf16 B8 S128 | 6.000 | 5.880 | 170667 | 300.5 | 517 | - | 1.00x |"),
            std::string::npos)
      << "no clock: a dash\n"
      << md;
}

// A child run's --json: the clock over its timed steps where the GPU was
// sampled; none on the CPU (null) or where NVML was not there (a note).
TEST(BenchResults, ReadsTheClockFromTheTrainReport) {
  nlohmann::json train = {{"ms_per_step", 2.0},
                          {"tokens_per_s", 512000.0},
                          {"samples_per_s", 4000.0},
                          {"peak_mb", 250.0},
                          {"final_loss", 4.25},
                          {"steps", {{{"ms", 2.0}}, {{"ms", 2.2}}}},
                          {"kernel_launches_per_step", 189}};
  train["clocks"] = {{"samples", 40},
                     {"sm_mhz_median", 1755.0},
                     {"reasons_pct", {{"power cap", 97.5}, {"thermal (software)", 0.0}}}};
  PointResult r;
  read_train_json(train, r);
  EXPECT_EQ(r.sm_mhz, 1755.0);
  EXPECT_EQ(r.power_capped_pct, 97.5);
  EXPECT_DOUBLE_EQ(r.median_ms_per_step, 2.1);
  for (const nlohmann::json& none :
       {nlohmann::json(nullptr), nlohmann::json{{"note", "no NVML"}}}) {
    train["clocks"] = none;
    PointResult cpu;
    read_train_json(train, cpu);
    EXPECT_FALSE(cpu.sm_mhz.has_value()) << none.dump();
    EXPECT_FALSE(cpu.power_capped_pct.has_value()) << none.dump();
  }
}

}  // namespace
}  // namespace tinyllama::suite
