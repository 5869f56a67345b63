// The workshop's remaining train flags: --compare-with-v1 FILE and
// --enable-all-profiling.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "run_binary.h"

namespace tinyllama::testing {
namespace {

namespace fs = std::filesystem;

const std::string kTiny =
    "train --device cpu --hidden-dim 32 --num-layers 2 --num-heads 4 --vocab-size 64 "
    "--seq-len 16 --batch-size 2 --num-steps 3 --warmup-steps 1 ";

TEST(CompareWithV1, SpeedupAndMemoryRatioAgainstTheEarlierJson) {
  const fs::path dir = scratch_dir("compare_with_v1");
  const fs::path v1 = dir / "v1.json", v3 = dir / "v3.json";
  ASSERT_EQ(run_tinyllama(kTiny + "--version v1 --json " + v1.string()).exit_code, 0);
  const RunResult r = run_tinyllama(kTiny + "--version v3 --compare-with-v1 " + v1.string() +
                                    " --json " + v3.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("  vs v1 (" + v1.string() + ")  "), std::string::npos) << r.out;
  const nlohmann::json before = nlohmann::json::parse(read_text(v1));
  const nlohmann::json after = nlohmann::json::parse(read_text(v3));
  const nlohmann::json& c = after.at("compare_with_v1");
  EXPECT_EQ(c["level"], "v1");
  EXPECT_DOUBLE_EQ(c["speedup"].get<double>(),
                   before["ms_per_step"].get<double>() / after["ms_per_step"].get<double>());
  EXPECT_DOUBLE_EQ(c["memory_ratio"].get<double>(),
                   after["peak_mb"].get<double>() / before["peak_mb"].get<double>());
  // v3's chunked loss and recomputation hold less than v1's full logits.
  EXPECT_LT(c["memory_ratio"].get<double>(), 1.0);
  fs::remove_all(dir);
}

TEST(CompareWithV1, ABadFileIsAUsageErrorBeforeTheRun) {
  const RunResult missing = run_tinyllama(kTiny + "--compare-with-v1 /nonexistent.json");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--compare-with-v1 /nonexistent.json: cannot be read"),
            std::string::npos)
      << missing.err;
  EXPECT_EQ(missing.out.find("step 1/"), std::string::npos) << "nothing trained";
}

TEST(EnableAllProfiling, WritesEveryProfileOutput) {
  const fs::path dir = scratch_dir("all_profiling");
  const RunResult r =
      run_tinyllama(kTiny + "--enable-all-profiling --profile-dir " + (dir / "p").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "p" / "summary.json"));
  EXPECT_TRUE(fs::exists(dir / "p" / "trace.json"));
  EXPECT_TRUE(fs::exists(dir / "p" / "memory_timeline.json"));
  EXPECT_TRUE(fs::exists(dir / "p" / "memory_timeline.svg"));
  const RunResult without = run_tinyllama(kTiny + "--profile-dir " + (dir / "q").string());
  EXPECT_EQ(without.exit_code, 2) << "--profile-dir still needs a profiling flag";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tinyllama::testing
