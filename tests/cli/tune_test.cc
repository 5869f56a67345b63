// `tune` as a user runs it: the JSON it writes and what is in it (the
// largest batch under the target, each point measured or skipped, the best
// of the measured), its exit codes and its errors for bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_binary.h"

namespace tinyllama::testing {
namespace {

namespace fs = std::filesystem;

const std::string kModel =
    "--device cpu --vocab-size 40 --hidden-dim 32 --num-layers 2 --num-heads 4 --seq-len 8 ";

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Tune, FindsTheLargestBatchUnderTheTargetAndMeasuresTheCandidates) {
  const auto dir = scratch_dir("tune");
  const std::string json_path = (dir / "tune.json").string();
  // 2.5 MB: a few of these small batches fit, not all of the listed ones.
  const RunResult r = run_tinyllama("tune " + kModel +
                                    "--max-memory 0.0025 --batches 1,4,64,900 --warmup-steps 1 "
                                    "--num-steps 2 --json " +
                                    json_path);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_TRUE(contains(r.out, "tune 1/")) << r.out;
  EXPECT_TRUE(contains(r.out, "ETA")) << r.out;
  EXPECT_TRUE(contains(r.out, "largest batch under")) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_text(json_path));
  for (const char* key : {"max_memory_bytes", "largest_batch", "largest_batch_predicted_bytes",
                          "best_batch", "best_tokens_per_s", "points", "config"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  const std::int64_t target = j["max_memory_bytes"].get<std::int64_t>();
  EXPECT_EQ(target, 2500000);
  const int largest = j["largest_batch"].get<int>();
  ASSERT_GT(largest, 4) << "the target was picked for batch 4 to fit";
  ASSERT_LT(largest, 900) << "and for batch 900 not to";
  EXPECT_LE(j["largest_batch_predicted_bytes"].get<std::int64_t>(), target);
  double best = 0;
  int best_batch = 0;
  ASSERT_EQ(j["points"].size(), 4u);
  for (const nlohmann::json& p : j["points"]) {
    const int b = p["batch"].get<int>();
    const std::int64_t predicted = p["predicted_bytes"].get<std::int64_t>();
    EXPECT_EQ(p["fits"].get<bool>(), b <= largest) << b;
    EXPECT_EQ(p["fits"].get<bool>(), predicted <= target) << b;
    EXPECT_EQ(p["measured"].get<bool>(), p["fits"].get<bool>()) << b << " " << p["status"];
    if (!p["measured"].get<bool>()) continue;
    // The child run reports the same peak (MB) the tuner predicted for it.
    EXPECT_NEAR(p["peak_mb"].get<double>() * 1e6, static_cast<double>(predicted), 1.0) << b;
    EXPECT_GT(p["tokens_per_s"].get<double>(), 0) << b;
    if (p["tokens_per_s"].get<double>() > best) {
      best = p["tokens_per_s"].get<double>();
      best_batch = b;
    }
  }
  EXPECT_EQ(j["best_batch"].get<int>(), best_batch);
  fs::remove_all(dir);
}

// A run that fails (here: the child's own memory check refuses batch 900 of
// a 200k vocabulary, about 186 GB of activations) fails only its point. v2
// keeps the whole fp32 logits; v3 and v4 chunk the loss, which bounds them,
// so the run would fit (and take very long on the CPU).
TEST(Tune, AFailedRunFailsOnlyItsPoint) {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  long long kb = 0;
  while (meminfo >> key >> kb && key != "MemAvailable:") meminfo.ignore(256, '\n');
  if (key == "MemAvailable:" && kb > 150LL * 1000 * 1000) {
    GTEST_SKIP() << "this host could hold the run meant to fail";
  }
  const auto dir = scratch_dir("tune_fail");
  const std::string json_path = (dir / "tune.json").string();
  const RunResult r = run_tinyllama(
      "tune --device cpu --version v2 --vocab-size 200000 --hidden-dim 32 --num-layers 1 "
      "--num-heads 4 "
      "--seq-len 256 --max-memory 100000 --batches 1,900 --warmup-steps 0 --num-steps 1 --json " +
      json_path);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_text(json_path));
  ASSERT_EQ(j["points"].size(), 2u);
  EXPECT_TRUE(j["points"][0]["measured"].get<bool>());
  EXPECT_FALSE(j["points"][1]["measured"].get<bool>());
  EXPECT_TRUE(
      contains(j["points"][1]["status"].get<std::string>(), "failed: exit 1 (error: run needs"))
      << j["points"][1]["status"];
  EXPECT_EQ(j["best_batch"].get<int>(), 1);
  EXPECT_TRUE(contains(r.out, "above what the cpu has")) << r.out;
  fs::remove_all(dir);
}

TEST(Tune, BadTargetsAndListsAreUsageErrors) {
  for (const std::string bad :
       {"--max-memory 0", "--max-memory -3", "--max-memory lots", "--max-memory 1 --batches 4,2",
        "--max-memory 1 --batches 0", "--max-memory 1 --precision fp8"}) {
    const RunResult r = run_tinyllama("tune " + kModel + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "error: ")) << bad << ": " << r.err;
    EXPECT_FALSE(contains(r.out, "tune 1/")) << bad;
  }
  const RunResult missing = run_tinyllama("tune " + kModel);
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(contains(missing.err, "--max-memory")) << missing.err;
}

TEST(Tune, ATargetBelowBatchOneFailsSayingWhatItNeeds) {
  const RunResult r = run_tinyllama("tune " + kModel + "--max-memory 0.0001");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "not even batch 1 fits")) << r.err;
}

}  // namespace
}  // namespace tinyllama::testing
