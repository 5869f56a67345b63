// End-to-end runs of `tinyllama train` on the CPU: the step lines, the JSON
// report's keys, and weights saved by one run read back by the next.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "run_binary.h"

namespace tinyllama::testing {
namespace {

const std::string kTiny =
    "train --device cpu --vocab-size 40 --hidden-dim 32 --num-layers 2 --num-heads 4 --seq-len 9 "
    "--batch-size 3 --num-steps 4 --warmup-steps 1 --log-every 2 ";

TEST(TrainRun, PrintsStepLinesAndWritesTheJsonReport) {
  const auto dir = scratch_dir("json");
  const RunResult r = run_tinyllama(kTiny + "--json " + (dir / "r.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("step 1/4 | loss "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 4/4 | loss "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("step 3/4"), std::string::npos) << "log-every 2 prints 1, 2, 4";
  // The warm-up step shows before the timed ones; not a terminal: no progress line.
  const auto warmup = r.out.find("warm-up 1/1 | loss ");
  EXPECT_NE(warmup, std::string::npos) << r.out;
  EXPECT_LT(warmup, r.out.find("step 1/4 | loss ")) << r.out;
  EXPECT_EQ(r.out.find("ETA"), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_text(dir / "r.json"));
  for (const char* key :
       {"samples_per_s", "tokens_per_s", "ms_per_step", "forward_ms", "backward_ms", "optimizer_ms",
        "final_loss", "losses", "peak_mb", "config", "device"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  ASSERT_EQ(j["losses"].size(), 4u);
  EXPECT_EQ(j["final_loss"].get<double>(), j["losses"][3].get<double>());
  EXPECT_GT(j["samples_per_s"].get<double>(), 0.0);
  EXPECT_EQ(j["config"]["hidden_dim"], 32);
  std::filesystem::remove_all(dir);
}

TEST(TrainRun, FusedOptimizerToggleReachesThePlan) {
  const auto dir = scratch_dir("fused_optimizer");
  const RunResult r = run_tinyllama(kTiny + "--version v1 --enable-fused-optimizer --json " +
                                    (dir / "r.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(read_text(dir / "r.json"));
  // v1 with the toggle asks for the per-layer sweeps; an eager step on the
  // cpu runs one fused sweep instead, and the plan says why.
  const nlohmann::json& plan = j["plan"];
  EXPECT_EQ(plan["level"], "v1");
  EXPECT_EQ(plan["ops"]["optimizer"], "fused");
  EXPECT_EQ(plan["ops"]["qkv_gemm"], "separate");
  ASSERT_EQ(plan["fallbacks"].size(), 1u) << plan.dump();
  EXPECT_EQ(plan["fallbacks"][0]["op"], "optimizer");
  EXPECT_EQ(plan["fallbacks"][0]["wanted"], "fused_per_layer");
  EXPECT_NE(r.out.find("optimizer fused |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fallback | optimizer fused_per_layer -> fused"), std::string::npos)
      << r.out;
  std::filesystem::remove_all(dir);
}

// --kernel-launch pdl on the CPU: the run header and --json say it runs
// plain, and why; a bad value is a usage error naming the allowed ones.
TEST(TrainRun, KernelLaunchPdlFallsBackToPlainOnTheCpuSayingWhy) {
  const auto dir = scratch_dir("kernel_launch");
  const RunResult r =
      run_tinyllama(kTiny + "--version v2 --kernel-launch pdl --json " + (dir / "r.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kernel_launch plain |"), std::string::npos) << r.out;
  EXPECT_NE(
      r.out.find("fallback | kernel_launch pdl -> plain: the cpu backend launches no kernels"),
      std::string::npos)
      << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_text(dir / "r.json"));
  const nlohmann::json& plan = j["plan"];
  EXPECT_EQ(plan["ops"]["kernel_launch"], "plain");
  bool said = false;
  for (const nlohmann::json& f : plan["fallbacks"]) {
    said = said || (f["op"] == "kernel_launch" && f["wanted"] == "pdl" && f["using"] == "plain");
  }
  EXPECT_TRUE(said) << plan.dump();

  const RunResult bad = run_tinyllama(kTiny + "--kernel-launch fast");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--kernel-launch fast: allowed values are plain, pdl, auto"),
            std::string::npos)
      << bad.err;
  std::filesystem::remove_all(dir);
}

TEST(TrainRun, SavedWeightsRestartTheRunAndWrongShapesAreRejected) {
  const auto dir = scratch_dir("weights");
  const std::string saved = (dir / "w.safetensors").string();
  RunResult r = run_tinyllama(kTiny + "--save-weights " + saved);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(std::filesystem::exists(saved));

  // Same config, starting from those weights: the run's initial weights,
  // dumped before step 1, are exactly the saved file.
  r = run_tinyllama(kTiny + "--init-from " + saved + " --dump-dir " + (dir / "dump").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_text(dir / "dump" / "init.safetensors"), read_text(saved));

  // A different hidden size cannot read those weights: one line, exit 2.
  r = run_tinyllama(
      "train --device cpu --vocab-size 40 --hidden-dim 48 --num-layers 2 --num-heads 4 --seq-len 9 "
      "--batch-size 3 --num-steps 1 --init-from " +
      saved);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--hidden-dim 32"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--hidden-dim 48"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

// --export-hf writes a Hugging Face directory; --init-from reads it back to
// exactly the weights --save-weights holds (one run writes both).
TEST(TrainRun, ExportedHfDirectoryRestartsTheRunLikeTheSavedFile) {
  const auto dir = scratch_dir("export_hf");
  const std::string saved = (dir / "w.safetensors").string();
  const std::string hf = (dir / "hf" / "model").string();
  RunResult r = run_tinyllama(kTiny + "--save-weights " + saved + " --export-hf " + hf);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(std::filesystem::exists(std::filesystem::path(hf) / "config.json"));
  const nlohmann::json config =
      nlohmann::json::parse(read_text(std::filesystem::path(hf) / "config.json"));
  EXPECT_EQ(config["vocab_size"], 40);
  EXPECT_EQ(config["max_position_embeddings"], 9);

  r = run_tinyllama(kTiny + "--init-from " + hf + " --dump-dir " + (dir / "dump").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_text(dir / "dump" / "init.safetensors"), read_text(saved));

  // Another model size: one line naming the config.json key and the flag, exit 2.
  r = run_tinyllama(
      "train --device cpu --vocab-size 41 --hidden-dim 32 --num-layers 2 --num-heads 4 --seq-len 9 "
      "--batch-size 3 --num-steps 1 --init-from " +
      hf);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("vocab_size is 40, expected 41; run with --vocab-size 40"),
            std::string::npos)
      << r.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tinyllama::testing
