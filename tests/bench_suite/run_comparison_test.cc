#include "bench_suite/run_comparison.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/errors.h"

namespace tinyllama::suite {
namespace {

TEST(RunComparison, SpeedupAndMemoryRatioAgainstAnEarlierReport) {
  const nlohmann::json earlier = {
      {"ms_per_step", 6.4}, {"peak_mb", 512.0}, {"config", {{"level", "v1"}}}};
  RunComparison c{read_earlier_run("v1.json", earlier), 3.2, 384.0};
  EXPECT_DOUBLE_EQ(c.speedup(), 2.0);
  EXPECT_DOUBLE_EQ(c.memory_ratio(), 0.75);
  EXPECT_EQ(c.summary_line(),
            "  vs v1 (v1.json)  2.00x faster (6.400 -> 3.200 ms/step) | peak memory 0.75x (512.0 "
            "-> 384.0 MB)\n");
  EXPECT_DOUBLE_EQ(c.to_json()["speedup"].get<double>(), 2.0);
  c.ms_per_step = 12.8;
  EXPECT_NE(c.summary_line().find("2.00x slower"), std::string::npos);
}

TEST(RunComparison, RefusesAFileThatIsNoTrainReport) {
  EXPECT_THROW(read_earlier_run("b.json", nlohmann::json{{"tool", "tinyllama bench"}}), UsageError);
  EXPECT_THROW(read_earlier_run("z.json", nlohmann::json{{"ms_per_step", 0.0}, {"peak_mb", 1.0}}),
               UsageError);
}

}  // namespace
}  // namespace tinyllama::suite
