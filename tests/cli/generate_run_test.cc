// End-to-end `tinyllama generate`: from a model trained and exported by
// `tinyllama train`, the same seed gives the same tokens, greedy decoding
// is repeatable, text prompts need a byte-sized vocabulary, and bad flags
// stop with one line naming the flag (exit 2).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "run_binary.h"

namespace tinyllama::testing {
namespace {

class GenerateRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(scratch_dir("generate"));
    const RunResult r = run_tinyllama(
        "train --device cpu --vocab-size 300 --hidden-dim 32 --num-layers 2 --num-heads 4 "
        "--seq-len 16 --batch-size 4 --num-steps 5 --warmup-steps 0 --export-hf " +
        (*dir_ / "hf").string() + " --save-weights " + (*dir_ / "w.safetensors").string());
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string hf() { return (*dir_ / "hf").string(); }
  static inline std::filesystem::path* dir_ = nullptr;
};

TEST_F(GenerateRun, SeededSamplingRepeatsAndGreedyIsTheSameFromEitherWeightsFormat) {
  const std::string sampled = "generate --weights " + hf() +
                              " --prompt-ids 3,1,4,1,5 --max-new-tokens 12 --seed 7 "
                              "--temperature 1.0 --top-k 40 --top-p 0.95 --print-ids";
  const RunResult a = run_tinyllama(sampled);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.out.find("ids | "), std::string::npos) << a.out;
  EXPECT_NE(a.err.find("prefill 5 tokens: "), std::string::npos) << a.err;
  EXPECT_NE(a.err.find("decode 12 tokens: "), std::string::npos) << a.err;
  EXPECT_EQ(run_tinyllama(sampled).out, a.out);

  const std::string greedy = " --prompt-ids 3,1,4 --max-new-tokens 8 --temperature 0 --print-ids";
  const RunResult from_dir = run_tinyllama("generate --weights " + hf() + greedy);
  const RunResult from_file =
      run_tinyllama("generate --weights " + (*dir_ / "w.safetensors").string() + greedy);
  ASSERT_EQ(from_dir.exit_code, 0) << from_dir.err;
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  EXPECT_EQ(from_dir.out, from_file.out);

  const RunResult text = run_tinyllama("generate --weights " + hf() +
                                       " --prompt 'Once upon' --max-new-tokens 4 --seed 1");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_EQ(text.out.rfind("Once upon", 0), 0u) << text.out;
}

TEST_F(GenerateRun, BadFlagsAreUsageErrors) {
  const std::string base = "generate --weights " + hf() + " ";
  for (const auto& [args, message] :
       {std::pair<std::string, std::string>{"--prompt-ids 1 --top-p 2", "--top-p 2: must lie"},
        {"--prompt-ids 1 --temperature -1", "--temperature -1: must be"},
        {"--prompt-ids 1 --max-new-tokens 0", "--max-new-tokens 0: must be >= 1"},
        {"--prompt-ids 1,300", "--prompt-ids: 300 is outside [0, 300)"},
        {"--prompt-ids 1 --prompt hi", "give exactly one of them"},
        {"--prompt-ids 1 --device tpu", "--device tpu: allowed values are cpu, cuda, auto"},
        {"--prompt-ids 1 --device cpu --dtype bfloat16", "--dtype bfloat16: the CPU decoder"},
        {"--prompt-ids 1 --device cpu --no-graph", "--no-graph: only with --device cuda"}}) {
    const RunResult r = run_tinyllama(base + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
  const RunResult missing = run_tinyllama("generate --weights /nonexistent/m --prompt-ids 1");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("/nonexistent/m: no such file or directory"), std::string::npos)
      << missing.err;
}

}  // namespace
}  // namespace tinyllama::testing
