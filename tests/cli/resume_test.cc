// Checkpoints and --resume on the CPU: a run stopped and resumed ends
// bit-identical to one never stopped (weights and every loss after the
// resume), old checkpoints are pruned, and a checkpoint of another run is
// refused naming the flag.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_binary.h"

namespace tinyllama::testing {
namespace {

namespace fs = std::filesystem;

const std::string kModel =
    "train --device cpu --vocab-size 64 --hidden-dim 32 --num-layers 2 --num-heads 4 "
    "--seq-len 8 --batch-size 3 --warmup-steps 2 --learning-rate 3e-3 --log-every 1 ";

nlohmann::json losses(const fs::path& report) {
  return nlohmann::json::parse(read_text(report))["losses"];
}

void expect_resume_bit_identical(const std::string& run, const fs::path& dir) {
  // Uninterrupted: 2 warm-up + 7 timed steps.
  RunResult r = run_tinyllama(run + "--num-steps 7 --save-weights " + (dir / "a.st").string() +
                              " --json " + (dir / "a.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Stopped after 2 + 3 steps with checkpoints every 2 steps (and at the end).
  const std::string ck = (dir / "ck").string();
  r = run_tinyllama(run + "--num-steps 3 --checkpoint-dir " + ck + " --checkpoint-every 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "ck" / "ckpt-00000004.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "ck" / "ckpt-00000005.safetensors"));
  // Resumed to the same 7 timed steps.
  r = run_tinyllama(run + "--num-steps 7 --resume " + ck + " --save-weights " +
                    (dir / "b.st").string() + " --json " + (dir / "b.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("resumed from " + ck + "/ckpt-00000005.safetensors (5 steps done)"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("step 3/7"), std::string::npos) << "steps done are not run again";
  const nlohmann::json a = losses(dir / "a.json");
  const nlohmann::json b = losses(dir / "b.json");
  ASSERT_EQ(a.size(), 7u);
  ASSERT_EQ(b.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(a[3 + i].get<double>(), b[i].get<double>()) << "timed step " << 4 + i;
  }
  EXPECT_NE(a[3].get<double>(), a[6].get<double>()) << "the run trains";
  EXPECT_EQ(read_text(dir / "a.st"), read_text(dir / "b.st")) << "weights differ";
}

TEST(Resume, SyntheticRunIsBitIdenticalToAnUninterruptedOne) {
  const auto dir = scratch_dir("resume_synthetic");
  expect_resume_bit_identical(kModel, dir);
  fs::remove_all(dir);
}

TEST(Resume, TextDataRunIsBitIdenticalWithEvaluations) {
  const auto dir = scratch_dir("resume_text");
  std::string text;
  for (int i = 0; i < 40; ++i) text += "line " + std::to_string(i * 7919 % 1000) + " of the text\n";
  std::ofstream(dir / "corpus.txt") << text;
  expect_resume_bit_identical(
      kModel + "--vocab-size 257 --data " + (dir / "corpus.txt").string() + " --eval-every 2 ",
      dir);
  fs::remove_all(dir);
}

// --attention auto: the resumed run takes the checkpoint's choice and says
// so (tests/train/checkpoint_test.cc checks the plan; on a GPU this is what
// keeps a resumed run from timing, and perhaps choosing, anew).
TEST(Resume, AttentionAutoTakesTheCheckpointsChoice) {
  const auto dir = scratch_dir("resume_auto");
  const std::string ck = (dir / "ck").string();
  const std::string run = kModel + "--attention auto --json " + (dir / "r.json").string() + " ";
  RunResult r = run_tinyllama(run + "--num-steps 1 --checkpoint-dir " + ck);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("not timed again"), std::string::npos) << r.out;
  r = run_tinyllama(run + "--num-steps 2 --resume " + ck);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string from = ck + "/ckpt-00000003.safetensors";
  EXPECT_NE(r.out.find("attention | auto chose flash (as in " + from + ", not timed again)"),
            std::string::npos)
      << r.out;
  const nlohmann::json j = nlohmann::json::parse(read_text(dir / "r.json"));
  EXPECT_EQ(j["plan"]["attention_auto"]["reused_from"], from);
  fs::remove_all(dir);
}

TEST(Resume, KeepPrunesOldCheckpoints) {
  const auto dir = scratch_dir("keep");
  const RunResult r = run_tinyllama(kModel + "--num-steps 4 --checkpoint-dir " +
                                    (dir / "ck").string() + " --checkpoint-every 1 --keep 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir / "ck")) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names,
            (std::vector<std::string>{"ckpt-00000005.safetensors", "ckpt-00000006.safetensors"}));
  fs::remove_all(dir);
}

TEST(Resume, RefusesACheckpointOfAnotherRunNamingTheFlag) {
  const auto dir = scratch_dir("resume_mismatch");
  const std::string ck = (dir / "ck").string();
  ASSERT_EQ(run_tinyllama(kModel + "--num-steps 1 --checkpoint-dir " + ck).exit_code, 0);
  RunResult r = run_tinyllama(kModel + "--num-steps 3 --hidden-dim 48 --resume " + ck);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--hidden-dim 48: the checkpoint"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("was saved with --hidden-dim 32"), std::string::npos) << r.err;
  r = run_tinyllama(kModel + "--num-steps 3 --seed 7 --resume " + ck);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--seed"), std::string::npos) << r.err;
  r = run_tinyllama(kModel + "--num-steps 1 --resume " + ck);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("raise --num-steps"), std::string::npos) << r.err;
  r = run_tinyllama(kModel + "--num-steps 3 --resume " + (dir / "empty").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--resume"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tinyllama::testing
