// `train --profile --profile-counters` on the CPU: the run completes, the
// profile is whole and says in one line why there are no counters; the
// baseline keeps its steps; the flags without --profile are usage errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/run_binary.h"

namespace tinyllama::testing {
namespace {

const std::string kTiny =
    "train --device cpu --vocab-size 40 --hidden-dim 32 --num-layers 2 --num-heads 4 --seq-len 9 "
    "--batch-size 3 --num-steps 5 --warmup-steps 1 --log-every 5 ";

TEST(CountersCli, CpuRunSaysCountersNeedCudaInOneLineAndKeepsTheRestOfTheProfile) {
  const auto dir = scratch_dir("counters");
  const RunResult r = run_tinyllama(kTiny +
                                    "--version v1 --profile --profile-steps 2 "
                                    "--profile-counters --explain-kernel 1 --profile-dir " +
                                    dir.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string line =
      "  counters  hardware counters unavailable: the run used the cpu backend";
  const auto at = r.out.find(line);
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\n', at), r.out.find("(counters need CUDA)\n", at) + 20) << r.out;
  const nlohmann::json s = nlohmann::json::parse(read_text(dir / "summary.json"));
  EXPECT_FALSE(s["counters"]["available"].get<bool>());
  EXPECT_TRUE(s.contains("ops"));
  EXPECT_FALSE(std::filesystem::exists(dir / "roofline.svg"));
  // No counter step on the CPU: the 3 steps after the profiled ones stay the baseline.
  EXPECT_TRUE(s["step_time"]["unprofiled_ms_per_step"].is_number());
  std::filesystem::remove_all(dir);
}

TEST(CountersCli, CounterFlagsNeedProfile) {
  RunResult r = run_tinyllama(kTiny + "--profile-counters");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--profile-counters: needs --profile"), std::string::npos) << r.err;
  r = run_tinyllama(kTiny + "--explain-kernel 1");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--explain-kernel: needs --profile"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tinyllama::testing
