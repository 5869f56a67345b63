#include "bench_suite/run_comparison.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace tinyllama::suite {
namespace {

TEST(RunComparison, SpeedupAndMemoryRatioAgainstAnEarlierReport) {
  const nlohmann::json earlier = {
      {"ms_per_step", 6.4}, {"peak_mb", 512.0}, {"config", {{"level", "v1"}}}};
  RunComparison c{read_earlier_run("v1.json", earlier), 3.2, 384.0, std::nullopt};
  EXPECT_DOUBLE_EQ(c.speedup(), 2.0);
  EXPECT_DOUBLE_EQ(c.memory_ratio(), 0.75);
  EXPECT_EQ(c.summary_line(),
            "  vs v1 (v1.json)  2.00x faster (6.400 -> 3.200 ms/step) | peak memory 0.75x (512.0 "
            "-> 384.0 MB)\n");
  EXPECT_DOUBLE_EQ(c.to_json()["speedup"].get<double>(), 2.0);
  c.ms_per_step = 12.8;
  EXPECT_NE(c.summary_line().find("2.00x slower"), std::string::npos);
  EXPECT_EQ(c.summary_line().find("SM clock"), std::string::npos) << "no clocks, no clause";
  EXPECT_TRUE(c.to_json()["baseline_sm_mhz"].is_null());
}

// Two GPU runs: both clocks on the line (a power-capped run is slower for
// that alone) and in the JSON.
TEST(RunComparison, NamesBothClocksWhereBothRunsHaveOne) {
  const nlohmann::json earlier = {{"ms_per_step", 6.4},
                                  {"peak_mb", 512.0},
                                  {"clocks", {{"samples", 30}, {"sm_mhz_median", 1980.0}}}};
  RunComparison c{read_earlier_run("v1.json", earlier), 3.2, 384.0, std::nullopt};
  EXPECT_EQ(c.earlier.sm_mhz, 1980.0);
  EXPECT_EQ(c.summary_line().find("SM clock"), std::string::npos) << "this run has none";
  c.sm_mhz = 1530;
  EXPECT_NE(c.summary_line().find("(512.0 -> 384.0 MB) | SM clock 1980 -> 1530 MHz\n"),
            std::string::npos)
      << c.summary_line();
  EXPECT_EQ(c.to_json()["sm_mhz"], 1530.0);
  const nlohmann::json cpu = {{"ms_per_step", 6.4}, {"peak_mb", 512.0}, {"clocks", nullptr}};
  EXPECT_FALSE(read_earlier_run("cpu.json", cpu).sm_mhz.has_value());
}

TEST(RunComparison, RefusesAFileThatIsNoTrainReport) {
  EXPECT_THROW(read_earlier_run("b.json", nlohmann::json{{"tool", "tinyllama bench"}}), UsageError);
  EXPECT_THROW(read_earlier_run("z.json", nlohmann::json{{"ms_per_step", 0.0}, {"peak_mb", 1.0}}),
               UsageError);
}

}  // namespace
}  // namespace tinyllama::suite
