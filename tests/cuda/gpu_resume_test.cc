// GPU --resume: a run stopped at a checkpoint and resumed ends bit-identical
// to one never stopped (final weights and every loss after the resume), in
// each precision, eager (v1) and with the captured step (v2, v3: graphs, the
// per-layer AdamW sweeps, two steps in flight), on synthetic tokens and on
// text with evaluations between the steps; with --attention auto, on the
// checkpoint's attention choice. Runs the real binary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "../cli/run_binary.h"
#include "cuda/cuda_entry.h"

namespace tinyllama::gpu_test {
namespace {

namespace fs = std::filesystem;
using ::tinyllama::testing::read_text;
using ::tinyllama::testing::run_tinyllama;
using ::tinyllama::testing::RunResult;
using ::tinyllama::testing::scratch_dir;

// precision flags, level, whether on text data
using ResumeCase = std::tuple<std::string, std::string, bool>;

class GpuResume : public ::testing::TestWithParam<ResumeCase> {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) {
      GTEST_SKIP() << "no CUDA device available: GPU test SKIPPED (run on a machine with a GPU)";
    }
  }
};

TEST_P(GpuResume, ResumedRunIsBitIdentical) {
  const auto& [precision, level, text] = GetParam();
  const auto dir = scratch_dir("gpu_resume");
  std::string run =
      "train --device cuda --vocab-size 300 --hidden-dim 64 --num-layers 2 --num-heads 4 "
      "--seq-len 32 --batch-size 4 --warmup-steps 2 --learning-rate 3e-3 --log-every 1 "
      "--version " +
      level + " " + precision + " ";
  if (text) {
    std::string corpus;
    for (int i = 0; i < 400; ++i)
      corpus += "line " + std::to_string(i * 7919 % 1000) + " of text\n";
    std::ofstream(dir / "corpus.txt") << corpus;
    run += "--data " + (dir / "corpus.txt").string() + " --eval-every 2 ";
  }
  // The uninterrupted run keeps its checkpoints; the resumed one starts from
  // its step-6 checkpoint in a new process. Two separate runs would each
  // time their own GEMM algorithms (and may round differently); a resumed
  // run reruns the ones its checkpoint was trained with.
  const std::string ck = (dir / "ck").string();
  RunResult r = run_tinyllama(run + "--num-steps 8 --checkpoint-dir " + ck +
                              " --checkpoint-every 6 --keep 0 --save-weights " +
                              (dir / "a.st").string() + " --json " + (dir / "a.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path from = dir / "from";
  fs::create_directories(from);
  fs::copy_file(fs::path(ck) / "ckpt-00000006.safetensors", from / "ckpt-00000006.safetensors");
  r = run_tinyllama(run + "--num-steps 8 --resume " + from.string() + " --save-weights " +
                    (dir / "b.st").string() + " --json " + (dir / "b.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json a = nlohmann::json::parse(read_text(dir / "a.json"))["losses"];
  const nlohmann::json b = nlohmann::json::parse(read_text(dir / "b.json"))["losses"];
  ASSERT_EQ(a.size(), 8u);
  ASSERT_EQ(b.size(), 4u);  // resumed after 2 warm-up + 4 timed steps
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(a[4 + i].get<double>(), b[i].get<double>()) << "timed step " << 5 + i;
  }
  EXPECT_EQ(read_text(dir / "a.st"), read_text(dir / "b.st")) << "final weights differ";
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Precisions, GpuResume,
                         ::testing::Combine(::testing::Values("", "--use-amp --amp-dtype bfloat16",
                                                              "--use-amp --amp-dtype float16",
                                                              "--use-amp --amp-dtype float8 "
                                                              "--fp8-gemms all",
                                                              "--use-amp --amp-dtype float8 "
                                                              "--fp8-gemms all --fp8-scaling "
                                                              "delayed"),
                                            ::testing::Values("v1", "v2", "v3"), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<ResumeCase>& info) {
                           const std::string& p = std::get<0>(info.param);
                           const std::string precision = p.empty()                      ? "fp32"
                                                         : p.find("bfloat16") != p.npos ? "bf16"
                                                         : p.find("delayed") != p.npos
                                                             ? "fp8delayed"
                                                         : p.find("float8") != p.npos ? "fp8"
                                                                                      : "fp16";
                           return precision + "_" + std::get<1>(info.param) +
                                  (std::get<2>(info.param) ? "_text" : "_synthetic");
                         });

// --attention auto under bf16 (flash and cuDNN both candidates where cuDNN
// is built): the resumed run takes the checkpoint's choice and both of its
// times, to the bit -- a new timing would measure different times, and
// might choose the other implementation -- and ends bit-identical to the
// run never stopped.
TEST(GpuResumeAuto, AttentionAutoTakesTheCheckpointsChoiceUntimed) {
  if (!cuda_device_available()) {
    GTEST_SKIP() << "no CUDA device available: GPU test SKIPPED (run on a machine with a GPU)";
  }
  const auto dir = scratch_dir("gpu_resume_auto");
  const std::string run =
      "train --device cuda --vocab-size 300 --hidden-dim 256 --num-layers 2 --num-heads 4 "
      "--seq-len 128 --batch-size 4 --warmup-steps 2 --learning-rate 3e-3 --log-every 1 "
      "--use-amp --amp-dtype bfloat16 --attention auto ";
  const std::string ck = (dir / "ck").string();
  RunResult r = run_tinyllama(run + "--num-steps 6 --checkpoint-dir " + ck +
                              " --checkpoint-every 4 --keep 0 --save-weights " +
                              (dir / "a.st").string() + " --json " + (dir / "a.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path from = dir / "from";
  fs::create_directories(from);
  fs::copy_file(fs::path(ck) / "ckpt-00000004.safetensors", from / "ckpt-00000004.safetensors");
  r = run_tinyllama(run + "--num-steps 6 --resume " + from.string() + " --save-weights " +
                    (dir / "b.st").string() + " --json " + (dir / "b.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("not timed again"), std::string::npos) << r.out;
  const nlohmann::json a = nlohmann::json::parse(read_text(dir / "a.json"));
  const nlohmann::json b = nlohmann::json::parse(read_text(dir / "b.json"));
  const nlohmann::json& was = a["plan"]["attention_auto"];
  const nlohmann::json& now = b["plan"]["attention_auto"];
  EXPECT_TRUE(was["reused_from"].is_null());
  EXPECT_EQ(now["reused_from"], (from / "ckpt-00000004.safetensors").string());
  EXPECT_EQ(now["chosen"], was["chosen"]);
  EXPECT_EQ(b["plan"]["ops"]["attention"], a["plan"]["ops"]["attention"]);
  EXPECT_EQ(now["flash"], was["flash"]) << "the times are the checkpoint's, not new ones";
  EXPECT_EQ(now["cudnn"], was["cudnn"]);
  ASSERT_EQ(a["losses"].size(), 6u);
  ASSERT_EQ(b["losses"].size(), 4u);  // resumed after 2 warm-up + 2 timed steps
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(a["losses"][2 + i].get<double>(), b["losses"][i].get<double>()) << "step " << 3 + i;
  }
  EXPECT_EQ(read_text(dir / "a.st"), read_text(dir / "b.st")) << "final weights differ";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tinyllama::gpu_test
