// The debugging exercise's faults and tools end to end on the CPU
// (docs/EXERCISES.md): each injected fault shows its symptom, the tools
// print their lines, the run says which faults it carried, and
// --validate-setup passes a sound setup and fails a broken one.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "model/tolerance.h"
#include "run_binary.h"
#include "train/setup_check.h"

namespace tinyllama::testing {
namespace {

const std::string kSmall =
    "train --device cpu --vocab-size 211 --hidden-dim 64 --num-layers 2 --num-heads 4 "
    "--seq-len 16 --batch-size 4 --warmup-steps 1 --num-steps 3 ";

int count_lines_starting(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.rfind(prefix, 0) == 0 ? 1 : 0;
  return n;
}

// The std of the logits on the line of `step` ("logits step 1/3 | ... | std X | ...").
double logit_std(const std::string& out, const std::string& step) {
  const std::size_t line = out.find("logits " + step);
  const std::size_t at = out.find("std ", line);
  if (line == std::string::npos || at == std::string::npos) return NAN;
  return std::stod(out.substr(at + 4));
}

TEST(Exercise, BrokenInitPutsTheLossFarAboveLnVocabAndTheLogitsShowIt) {
  const auto dir = scratch_dir("exercise");
  const RunResult good =
      run_tinyllama(kSmall + "--log-logit-stats --json " + (dir / "good.json").string());
  const RunResult bad = run_tinyllama(kSmall + "--log-logit-stats --inject broken-init --json " +
                                      (dir / "bad.json").string());
  ASSERT_EQ(good.exit_code, 0) << good.err;
  ASSERT_EQ(bad.exit_code, 0) << bad.err;
  const auto g = nlohmann::json::parse(read_text(dir / "good.json"));
  const auto b = nlohmann::json::parse(read_text(dir / "bad.json"));
  const double limit = init_loss_limit(211, 64, 4 * 16);
  EXPECT_LE(g["losses"][0].get<double>(), limit);
  EXPECT_GT(b["losses"][0].get<double>(), 2 * limit) << "broken-init's loss is not far above";
  EXPECT_TRUE(g["injected_faults"].empty());
  EXPECT_EQ(b["injected_faults"], nlohmann::json({"broken-init"}));
  EXPECT_NE(bad.out.find("inject | broken-init: exercise faults"), std::string::npos) << bad.out;
  // A logits line after every step, warm-up included; N(0, 1) weights give
  // logits 1/0.02 = 50 times wider, at least ten times here.
  EXPECT_EQ(count_lines_starting(good.out, "logits step "), 3) << good.out;
  EXPECT_EQ(count_lines_starting(good.out, "logits warm-up "), 1) << good.out;
  const double good_std = logit_std(good.out, "step 1/3");
  const double bad_std = logit_std(bad.out, "step 1/3");
  EXPECT_GT(good_std, 0.0);
  EXPECT_GT(bad_std, 10 * good_std) << good.out << bad.out;
  std::filesystem::remove_all(dir);
}

TEST(Exercise, UnsyncedTimingPrintsHostClocksBesideTheEvents) {
  const RunResult r = run_tinyllama(kSmall + "--inject unsynced-timing");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count_lines_starting(r.out, "timing step "), 3) << r.out;
  EXPECT_EQ(count_lines_starting(r.out, "timing warm-up "), 1) << r.out;
  EXPECT_NE(r.out.find("host clock, no sync: fwd "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| events: fwd "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the cpu backend runs each op before returning"), std::string::npos);
  // Without the fault, no such line.
  const RunResult plain = run_tinyllama(kSmall);
  EXPECT_EQ(count_lines_starting(plain.out, "timing "), 0) << plain.out;
}

TEST(Exercise, ValidateSetupPassesASoundSetupAndFailsABrokenInit) {
  const RunResult ok = run_tinyllama(kSmall + "--validate-setup");
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("validate-setup: PASS"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("ok   step 1 against the float64 reference"), std::string::npos) << ok.out;
  const RunResult broken = run_tinyllama(kSmall + "--validate-setup --inject broken-init");
  EXPECT_EQ(broken.exit_code, 1) << broken.out << broken.err;
  EXPECT_NE(broken.err.find("error: validate-setup: FAIL: step 1 loss"), std::string::npos)
      << broken.err;
}

// Slow, not wrong: the same losses as the healthy run (fp32, another
// summation order: within the fp32 tolerance).
TEST(Exercise, KernelFaultsTrainLikeTheHealthyOps) {
  const auto dir = scratch_dir("kernel_faults");
  const RunResult healthy = run_tinyllama(kSmall + "--json " + (dir / "healthy.json").string());
  ASSERT_EQ(healthy.exit_code, 0) << healthy.err;
  const auto h = nlohmann::json::parse(read_text(dir / "healthy.json"));
  ASSERT_EQ(h["losses"].size(), 3u);
  for (const std::string fault : {"naive-swiglu", "noncontiguous-kv"}) {
    const std::string json = (dir / (fault + ".json")).string();
    const RunResult r = run_tinyllama(kSmall + "--inject " + fault + " --json " + json);
    ASSERT_EQ(r.exit_code, 0) << fault << ": " << r.err;
    const auto j = nlohmann::json::parse(read_text(json));
    EXPECT_EQ(j["injected_faults"], nlohmann::json({fault}));
    for (std::size_t i = 0; i < 3; ++i) {
      const double a = j["losses"][i].get<double>(), b = h["losses"][i].get<double>();
      EXPECT_NEAR(a, b, kFp32Tolerance * b) << fault << " step " << i + 1;
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(Exercise, BadInjectionsAreUsageErrors) {
  RunResult r = run_tinyllama(kSmall + "--inject slow-everything");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("allowed values are broken-init, noncontiguous-kv, unsynced-timing, "
                       "naive-swiglu"),
            std::string::npos)
      << r.err;
  r = run_tinyllama(kSmall + "--inject noncontiguous-kv --version v1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--inject noncontiguous-kv: replaces the flash attention forward, and "
                       "this run's attention is materialized (add --attention flash)"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace tinyllama::testing
