// The training recipe on the command line (issue 41): every bad value is
// refused before anything runs with one line naming the flag (exit 2); a
// corrupt --init-from or --resume file is refused before the run header;
// a run stopped and resumed mid-warm-up and mid-decay, with clipping and
// accumulation, ends bit-identical to one never stopped; `tinyllama plot`
// draws a run's curve from its --json reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "io/safetensors.h"
#include "run_binary.h"

namespace tinyllama::testing {
namespace {

namespace fs = std::filesystem;

const std::string kSmall =
    "train --device cpu --vocab-size 50 --hidden-dim 32 --num-layers 1 --num-heads 4 --seq-len 8 "
    "--batch-size 2 --num-steps 4 --warmup-steps 0 ";

struct BadRecipe {
  std::string args;
  std::string expected;
};

class RecipeValidation : public ::testing::TestWithParam<BadRecipe> {};

TEST_P(RecipeValidation, OneLineAndExitCode2BeforeAnythingRuns) {
  const BadRecipe c = GetParam();
  const RunResult r = run_tinyllama(kSmall + c.args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(c.expected), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
  EXPECT_EQ(r.out, "") << "nothing may be announced: " << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    EveryRule, RecipeValidation,
    ::testing::Values(
        BadRecipe{"--learning-rate -1e-3",
                  "--learning-rate -0.001: must be a finite number above 0"},
        BadRecipe{"--lr-schedule exponential", "--lr-schedule exponential: expected constant"},
        BadRecipe{"--lr-warmup-steps 5", "--lr-warmup-steps 5: must lie in [0, 4]"},
        BadRecipe{"--lr-schedule cosine --min-lr 1",
                  "--min-lr 1: must lie in [0, --learning-rate]"},
        BadRecipe{"--min-lr 1e-5", "--min-lr: only with a decaying --lr-schedule"},
        BadRecipe{"--lr-schedule cosine --lr-decay-steps 2", "--lr-decay-steps: only with"},
        BadRecipe{"--lr-schedule wsd --lr-decay-steps 9", "--lr-decay-steps 9: must lie in [1, 4]"},
        BadRecipe{"--grad-clip 0", "--grad-clip 0: must be above 0"},
        BadRecipe{"--grad-clip -1", "--grad-clip -1: must be above 0"},
        BadRecipe{"--grad-accum-steps 0", "--grad-accum-steps 0: must be at least 1"},
        BadRecipe{"--total-batch-tokens 100", "--total-batch-tokens 100: must be a multiple of"},
        BadRecipe{"--total-batch-tokens 64 --grad-accum-steps 2", "not with --grad-accum-steps"},
        BadRecipe{"--weight-decay -0.1", "--weight-decay -0.1: must be 0 or more"},
        BadRecipe{"--adam-beta1 1", "--adam-beta1 1: must lie in [0, 1)"},
        BadRecipe{"--adam-beta2 -0.5", "--adam-beta2 -0.5: must lie in [0, 1)"},
        BadRecipe{"--adam-eps 0", "--adam-eps 0: must be above 0"},
        BadRecipe{"--decay-params norms", "--decay-params norms: expected all or matrices"},
        BadRecipe{"--batch-size 300 --grad-accum-steps 4", "more than the synthetic pool's 1000"}));

TEST(RecipeRun, TotalBatchTokensDerivesTheMicroBatches) {
  const RunResult r = run_tinyllama(kSmall + "--total-batch-tokens 64 --log-every 1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("4 micro-batches of 16 tokens = 64 tokens per step"), std::string::npos)
      << r.out;
}

TEST(RecipeRun, ATruncatedWeightsFileIsRefusedBeforeTheHeader) {
  const auto dir = scratch_dir("recipe_truncated");
  const fs::path weights = dir / "w.safetensors";
  ASSERT_EQ(run_tinyllama(kSmall + "--num-steps 1 --save-weights " + weights.string()).exit_code,
            0);
  const std::string whole = read_text(weights);
  std::ofstream(weights, std::ios::binary) << whole.substr(0, whole.size() - 100);
  RunResult r = run_tinyllama(kSmall + "--init-from " + weights.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--init-from " + weights.string()), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << "refused before the run header: " << r.out;
  // A checkpoint cut short: the same, naming --resume.
  const fs::path ck = dir / "ck";
  ASSERT_EQ(run_tinyllama(kSmall + "--checkpoint-dir " + ck.string()).exit_code, 0);
  const fs::path last = ck / "ckpt-00000004.safetensors";
  const std::string saved = read_text(last);
  std::ofstream(last, std::ios::binary) << saved.substr(0, saved.size() / 2);
  r = run_tinyllama(kSmall + "--num-steps 6 --resume " + ck.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--resume " + last.string()), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "") << r.out;
  fs::remove_all(dir);
}

// 2 untimed + 10 timed steps, warm-up over the first 4 and cosine after,
// clipping and 3 micro-batches; stopped after 3 (mid-warm-up) and after 8
// (mid-decay) steps and resumed each time.
TEST(RecipeRun, ResumesBitIdenticallyMidWarmUpAndMidDecay) {
  const auto dir = scratch_dir("recipe_resume");
  const std::string run = kSmall +
                          "--warmup-steps 2 --learning-rate 3e-3 --lr-schedule cosine "
                          "--lr-warmup-steps 4 --min-lr 1e-4 --grad-clip 0.5 "
                          "--grad-accum-steps 3 --decay-params matrices --log-every 1 ";
  const auto steps = [](int n) { return "--num-steps " + std::to_string(n) + " "; };
  RunResult r = run_tinyllama(run + steps(10) + "--save-weights " + (dir / "a.st").string() +
                              " --json " + (dir / "a.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The schedule spans all 12 steps: a resume may not change --num-steps.
  const std::string ck = (dir / "ck").string();
  r = run_tinyllama(run + steps(10) + "--checkpoint-dir " + ck + " --checkpoint-every 3 --keep 0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int kept : {3, 6, 9, 12}) {
    char name[64];
    std::snprintf(name, sizeof name, "ckpt-%08d.safetensors", kept);
    ASSERT_TRUE(fs::exists(fs::path(ck) / name)) << name;
  }
  // The checkpoint after 6 steps records the rate of step 6 (0-based), the
  // uninterrupted run's 5th timed step.
  const auto meta =
      read_safetensors_metadata((fs::path(ck) / "ckpt-00000006.safetensors").string());
  const auto state = nlohmann::json::parse(meta.at("state"));
  const auto first = nlohmann::json::parse(read_text(dir / "a.json"));
  EXPECT_EQ(state.at("next_lr").get<double>(), first["lrs"][4].get<double>());
  fs::remove(fs::path(ck) / "ckpt-00000012.safetensors");
  fs::remove(fs::path(ck) / "ckpt-00000009.safetensors");
  // From step 6 (4 warm-up steps of the schedule behind it, in its decay).
  r = run_tinyllama(run + steps(10) + "--resume " + ck + " --save-weights " +
                    (dir / "b.st").string() + " --json " + (dir / "b.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(6 steps done)"), std::string::npos) << r.out;
  EXPECT_EQ(read_text(dir / "a.st"), read_text(dir / "b.st")) << "weights differ";
  const auto a = nlohmann::json::parse(read_text(dir / "a.json"));
  const auto b = nlohmann::json::parse(read_text(dir / "b.json"));
  for (std::size_t i = 0; i < b["losses"].size(); ++i) {
    EXPECT_EQ(b["losses"][i], a["losses"][4 + i]) << i;
    EXPECT_EQ(b["lrs"][i], a["lrs"][4 + i]) << i;
    EXPECT_EQ(b["grad_norms"][i], a["grad_norms"][4 + i]) << i;
  }
  // From step 3: mid-warm-up (the schedule's step 3 of 4).
  fs::remove(fs::path(ck) / "ckpt-00000006.safetensors");
  r = run_tinyllama(run + steps(10) + "--resume " + ck + " --save-weights " +
                    (dir / "c.st").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("(3 steps done)"), std::string::npos) << r.out;
  EXPECT_EQ(read_text(dir / "a.st"), read_text(dir / "c.st")) << "weights differ";
  // Another schedule length would be another curve: refused naming the flag.
  r = run_tinyllama(run + steps(12) + "--resume " + ck);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--lr-schedule cosine"), std::string::npos) << r.err;
  r = run_tinyllama(run + steps(10) + "--grad-clip 0.25 --resume " + ck);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--grad-clip 0.25"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(Plot, DrawsTheLossAndLearningRateOfARunAndItsResumption) {
  const auto dir = scratch_dir("recipe_plot");
  const std::string json = (dir / "run.json").string();
  ASSERT_EQ(run_tinyllama(kSmall + "--lr-schedule linear --log-grad-norm --json " + json).exit_code,
            0);
  const std::string svg = (dir / "curve.svg").string();
  RunResult r = run_tinyllama("plot " + json + " " + json + " --output " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + svg + " (4 steps)"), std::string::npos) << r.out;
  const std::string text = read_text(svg);
  EXPECT_NE(text.find("train loss"), std::string::npos);
  EXPECT_NE(text.find("learning rate"), std::string::npos);
  EXPECT_NE(text.find("gradient norm"), std::string::npos);
  EXPECT_EQ(std::count(text.begin(), text.end(), '<') - std::count(text.begin(), text.end(), '>'),
            0);
  // Not a train report: one line naming the file, nothing written.
  std::ofstream(dir / "other.json") << "{\"a\": 1}";
  r = run_tinyllama("plot " + (dir / "other.json").string() + " --output " +
                    (dir / "x.svg").string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("not a train --json report"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "x.svg"));
  fs::remove_all(dir);
}

// --run: several runs on shared axes, a series per label; a run's reports
// joined by commas; a malformed --run, or reports and --run together,
// refused before anything is written.
TEST(Plot, DrawsSeveralRunsOnSharedAxes) {
  const auto dir = scratch_dir("recipe_plot_runs");
  const std::string a = (dir / "a.json").string(), b = (dir / "b.json").string();
  ASSERT_EQ(run_tinyllama(kSmall + "--json " + a).exit_code, 0);
  ASSERT_EQ(run_tinyllama(kSmall + "--learning-rate 1e-3 --json " + b).exit_code, 0);
  const std::string svg = (dir / "runs.svg").string();
  RunResult r = run_tinyllama("plot --run slow=" + a + "," + a + " --run fast=" + b +
                              " --title precisions --output " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + svg + " (2 runs)"), std::string::npos) << r.out;
  const std::string text = read_text(svg);
  EXPECT_NE(text.find("precisions: training loss"), std::string::npos);
  EXPECT_NE(text.find(">slow<"), std::string::npos) << text.substr(0, 400);
  EXPECT_NE(text.find(">fast<"), std::string::npos);
  for (const std::string& bad : std::vector<std::string>{
           "--run =" + a, "--run slow=", "--run slow=" + a + ",", a + " --run slow=" + a}) {
    r = run_tinyllama("plot " + bad + " --output " + (dir / "x.svg").string());
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "x.svg"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tinyllama::testing
