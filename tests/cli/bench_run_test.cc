// `tinyllama bench` and `tinyllama compare` end to end on the CPU, with a
// model small enough for CI: the files they write, and the regression
// check's exit codes on an unchanged baseline and on a planted slowdown.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "run_binary.h"

namespace tinyllama::testing {
namespace {

namespace fs = std::filesystem;

const std::string kTinyModel =
    " --device cpu --hidden-dim 32 --num-layers 2 --num-heads 4 --vocab-size 64 --num-steps 2 "
    "--warmup-steps 1";

int count_lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n' ? 1 : 0;
  return n;
}

nlohmann::json read_json(const fs::path& p) {
  return nlohmann::json::parse(read_text(p));
}

class BenchRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(scratch_dir("bench_cli"));
    result_ =
        new RunResult(run_tinyllama("bench --levels v1,v2 --precisions fp32 --batch-sizes 2 "
                                    "--seq-lens 8,16 --peer off --out " +
                                    dir_->string() + kTinyModel));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete result_;
  }
  static fs::path* dir_;
  static RunResult* result_;
};
fs::path* BenchRun::dir_ = nullptr;
RunResult* BenchRun::result_ = nullptr;

TEST_F(BenchRun, WritesEveryPointWithItsFigures) {
  ASSERT_EQ(result_->exit_code, 0) << result_->out << result_->err;
  EXPECT_NE(result_->out.find("[4/4] v2 fp32 B2 S16: "), std::string::npos) << result_->out;
  EXPECT_NE(result_->out.find("ETA"), std::string::npos);
  const nlohmann::json j = read_json(*dir_ / "bench.json");
  EXPECT_EQ(j["tool"], "tinyllama bench");
  EXPECT_EQ(j["device"], "cpu");
  for (const char* key : {"commit", "date", "host", "device", "cuda_cudnn", "driver"}) {
    EXPECT_TRUE(j["environment"].contains(key)) << key;
  }
  ASSERT_EQ(j["points"].size(), 4u);
  for (const nlohmann::json& p : j["points"]) {
    EXPECT_EQ(p["status"], "ok") << p.dump();
    EXPECT_GT(p["ms_per_step"].get<double>(), 0);
    EXPECT_GT(p["tokens_per_s"].get<double>(), 0);
    EXPECT_GT(p["peak_mb"].get<double>(), 0);
    EXPECT_TRUE(std::isfinite(p["final_loss"].get<double>()));
  }
  EXPECT_EQ(j["points"][3]["key"], "v2 fp32 B2 S16");
  // Each point's own train --json is kept beside it.
  EXPECT_TRUE(fs::exists(*dir_ / "points" / "v1_fp32_B2_S8" / "train.json"));
}

TEST_F(BenchRun, WritesCsvMarkdownAndPlots) {
  ASSERT_EQ(result_->exit_code, 0) << result_->err;
  const std::string csv = read_text(*dir_ / "bench.csv");
  EXPECT_EQ(count_lines(csv), 5) << csv;
  EXPECT_EQ(csv.rfind("key,model,level,", 0), 0u);
  const std::string md = read_text(*dir_ / "bench.md");
  EXPECT_NE(md.find("| v1 fp32 B2 S8 | "), std::string::npos) << md;
  EXPECT_NE(md.find("1.00x"), std::string::npos) << "v1 against itself";
  for (const char* svg : {"speedup_per_level.svg", "time_vs_seq.svg", "memory_vs_seq.svg",
                          "throughput_vs_batch.svg"}) {
    const std::string text = read_text(*dir_ / svg);
    EXPECT_EQ(text.rfind("<svg ", 0), 0u) << svg;
    EXPECT_NE(md.find(std::string("](") + svg + ")"), std::string::npos) << svg;
  }
}

TEST_F(BenchRun, RegressionCheckPassesUnchangedAndFailsAPlantedSlowdown) {
  ASSERT_EQ(result_->exit_code, 0) << result_->err;
  const fs::path bench = *dir_ / "bench.json";
  const fs::path out = *dir_ / "check";
  const RunResult same =
      run_tinyllama("bench --from-json " + bench.string() + " --baseline " + bench.string() +
                    " --max-slowdown 0.05 --out " + out.string());
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_NE(same.out.find("4 points compared, 0 regressed"), std::string::npos) << same.out;

  // A baseline edited to be faster: v2 S16 at half its time.
  nlohmann::json planted = read_json(bench);
  planted["points"][3]["ms_per_step"] = planted["points"][3]["ms_per_step"].get<double>() / 2;
  const fs::path planted_path = *dir_ / "planted.json";
  std::ofstream(planted_path) << planted.dump();
  const RunResult slower =
      run_tinyllama("bench --from-json " + bench.string() + " --baseline " + planted_path.string() +
                    " --max-slowdown 0.05 --out " + out.string());
  EXPECT_EQ(slower.exit_code, 1) << slower.out << slower.err;
  EXPECT_NE(slower.out.find("regressed: D32 L2 H4 K2 F128 vocab 64 | v2 fp32 B2 S16: "),
            std::string::npos)
      << slower.out;
  EXPECT_NE(slower.out.find("100.0 % slower"), std::string::npos) << slower.out;
  EXPECT_EQ(count_lines(slower.out.substr(slower.out.find("regressed:"))), 2)
      << "one regressed point, then the verdict: " << slower.out;
  EXPECT_NE(slower.err.find("error: regression check failed"), std::string::npos);

  // --min-speedup: the unchanged run is not 1.5x faster than itself.
  const RunResult speedup =
      run_tinyllama("bench --from-json " + bench.string() + " --baseline " + bench.string() +
                    " --min-speedup 1.5 --out " + out.string());
  EXPECT_EQ(speedup.exit_code, 1) << speedup.out;
}

TEST(BenchUsage, BadValuesAreOneLineUsageErrors) {
  const RunResult level = run_tinyllama("bench --levels v1,v9 --peer off");
  EXPECT_EQ(level.exit_code, 2);
  EXPECT_NE(level.err.find("--levels v1,v9: unknown level 'v9'"), std::string::npos) << level.err;
  const RunResult rule = run_tinyllama("bench --max-slowdown 0.1 --peer off");
  EXPECT_EQ(rule.exit_code, 2);
  EXPECT_NE(rule.err.find("--max-slowdown: needs --baseline"), std::string::npos) << rule.err;
  const RunResult out = run_tinyllama("bench --peer off --out /proc/version/x");
  EXPECT_EQ(out.exit_code, 2) << out.err;
  EXPECT_NE(out.err.find("error: --out /proc/version/x: "), std::string::npos) << out.err;
  const RunResult missing = run_tinyllama("bench --from-json /nonexistent/bench.json");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(count_lines(missing.err), 1) << missing.err;
}

TEST(BenchRunFailure, AFailedPointIsRecordedAndTheBenchGoesOn) {
  // bf16 needs CUDA: on the CPU each such point fails alone, with its reason.
  const fs::path dir = scratch_dir("bench_fail");
  const RunResult r = run_tinyllama(
      "bench --levels v1 --precisions bf16,fp32 --batch-sizes 2 "
      "--seq-lens 8 --peer off --out " +
      dir.string() + kTinyModel);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("error: 1 of 2 points failed"), std::string::npos) << r.err;
  const nlohmann::json j = read_json(dir / "bench.json");
  ASSERT_EQ(j["points"].size(), 2u);
  EXPECT_EQ(j["points"][0]["status"], "failed");
  EXPECT_FALSE(j["points"][0]["error"].get<std::string>().empty());
  EXPECT_EQ(j["points"][1]["status"], "ok");
  fs::remove_all(dir);
}

TEST(BenchResume, TakesTheFinishedPointsAndRunsOnlyTheOthers) {
  const fs::path dir = scratch_dir("bench_resume");
  const std::string matrix =
      "bench --levels v1 --precisions fp32 --batch-sizes 2 --peer off --out " + dir.string() +
      kTinyModel;
  ASSERT_EQ(run_tinyllama(matrix + " --seq-lens 8").exit_code, 0);
  const nlohmann::json first = read_json(dir / "bench.json");
  const RunResult more = run_tinyllama(matrix + " --seq-lens 8,16 --resume");
  ASSERT_EQ(more.exit_code, 0) << more.out << more.err;
  EXPECT_NE(more.out.find("[1/2] v1 fp32 B2 S8: "), std::string::npos);
  EXPECT_NE(more.out.find("(from the earlier run)"), std::string::npos) << more.out;
  EXPECT_EQ(more.out.find("[2/2] v1 fp32 B2 S16: FAILED"), std::string::npos) << more.out;
  const nlohmann::json second = read_json(dir / "bench.json");
  ASSERT_EQ(second["points"].size(), 2u);
  EXPECT_EQ(second["points"][0]["ms_per_step"], first["points"][0]["ms_per_step"])
      << "the finished point is taken, not run again";
  const RunResult other = run_tinyllama(
      "bench --levels v1 --precisions fp32 --batch-sizes 2 --seq-lens 8 --peer off --resume "
      "--out " +
      dir.string() + kTinyModel + " --num-steps 3");
  EXPECT_EQ(other.exit_code, 2) << "another step count cannot resume: " << other.err;
  fs::remove_all(dir);
}

TEST(BenchAblation, EachChoiceSwitchedAloneGetsARow) {
  const fs::path dir = scratch_dir("bench_ablation");
  const RunResult r = run_tinyllama(
      "bench --levels v3 --precisions fp32 --batch-sizes 2 "
      "--seq-lens 8 --ablation --peer off --out " +
      dir.string() + kTinyModel);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string md = read_text(dir / "bench.md");
  EXPECT_NE(md.find("## Ablation"), std::string::npos);
  for (const char* name :
       {"qkv_fusion off", "swiglu_fusion off", "attention materialized", "cuda_graphs off",
        "fused_optimizer off", "norm plain", "loss full_logits"}) {
    EXPECT_NE(md.find("| v3 fp32 B2 S8 | " + std::string(name) + " | "), std::string::npos)
        << name << "\n"
        << md;
  }
  fs::remove_all(dir);
}

TEST(CompareRun, LevelsSideBySideWithoutInventedKernelFigures) {
  const fs::path dir = scratch_dir("compare_cli");
  const RunResult r =
      run_tinyllama("compare --levels v1,v2 --batch-size 2 --seq-len 8 --profile-steps 1 --out " +
                    dir.string() + kTinyModel);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string md = read_text(dir / "compare.md");
  EXPECT_NE(md.find("| | v1 | v2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| kernel dispatches per step | n/a (no kernel records, see below) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("No kernel figures: no kernel records: "), std::string::npos) << md;
  EXPECT_NE(md.find("## Each fusion's measured effect"), std::string::npos);
  EXPECT_NE(md.find("| v2 fp32 B2 S8 | attention materialized | "), std::string::npos) << md;
  const nlohmann::json j = read_json(dir / "compare.json");
  EXPECT_EQ(j["tool"], "tinyllama compare");
  ASSERT_EQ(j["levels"].size(), 2u);
  EXPECT_FALSE(j["levels"][0]["profile"]["kernel_statistics"].get<bool>());
  EXPECT_TRUE(j["levels"][0]["profile"]["kernel_dispatches_per_step"].is_null());
  EXPECT_GT(j["levels"][0]["profile"]["trace_bytes"].get<long>(), 0);
  EXPECT_EQ(j["fusion_effects"].size(), 5u);
  EXPECT_EQ(read_text(dir / "compare_ms_per_step.svg").rfind("<svg ", 0), 0u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tinyllama::testing
