// `tinyllama kernels` as a user runs it: every bad value is one line on
// stderr naming the flag (exit code 2) before anything touches a device;
// without a GPU (or a CUDA build) a valid command line is one line and
// exit code 1; with one, a small run prints its table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "cli/run_binary.h"
#include "cuda/cuda_entry.h"

namespace tinyllama::testing {
namespace {

struct BadFlag {
  std::string args;      // after "kernels "
  std::string expected;  // a substring of the one-line error
};

class KernelsValidation : public ::testing::TestWithParam<BadFlag> {};

TEST_P(KernelsValidation, OneLineAndExitCode2) {
  const BadFlag c = GetParam();
  const RunResult r = run_tinyllama("kernels " + c.args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(c.expected), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
  EXPECT_EQ(r.out, "") << "nothing may run";
}

INSTANTIATE_TEST_SUITE_P(
    EveryRule, KernelsValidation,
    ::testing::Values(
        BadFlag{"--config 2b",
                "--config 2b: unknown config '2b'; expected workshop, big, 1b or all"},
        BadFlag{"--precision fp8", "--precision fp8: unknown precision 'fp8'; expected fp32, bf16"},
        BadFlag{"--ops softmax", "--ops softmax: no op 'softmax'; expected a family ("},
        BadFlag{"--ops attention.fwd:fast",
                "has no variant 'fast'; its variants: cudnn, flash, flash+rope, flash-mma, "
                "flash-ov1x64"},
        BadFlag{"--repeats 0", "--repeats 0: must be between 1 and 10000"},
        BadFlag{"--repeats ten", "--repeats ten: expected an integer"},
        BadFlag{"--warmup 0", "--warmup 0: must be at least 1"},
        BadFlag{"--timing cupti", "--timing cupti: expected graph or eager"},
        BadFlag{"--hidden-dim 30", "--hidden-dim 30: must be divisible by --num-heads 8"},
        BadFlag{"--num-kv-heads 3", "--num-heads 8: must be divisible by --num-kv-heads 3"},
        BadFlag{"--seq-len 1", "--seq-len 1: must be at least 2"},
        BadFlag{"--batch-size 0", "--batch-size 0: must be at least 1"},
        BadFlag{"--vocab-size 1", "--vocab-size 1: must be at least 2"},
        BadFlag{"--json /nonexistent/dir/k.json", "does not exist"},
        BadFlag{"--bogus 3", "--bogus: unknown flag"}, BadFlag{"--ops", "--ops: missing value"}),
    [](const auto& info) {
      std::string name;
      for (char ch : info.param.args)
        name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return name;
    });

TEST(KernelsCli, HelpExplainsTheFlagsAndTheColumns) {
  const RunResult r = run_tinyllama("kernels --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag :
       {"--config", "--hidden-dim", "--num-heads", "--num-kv-heads", "--ffn-dim", "--vocab-size",
        "--batch-size", "--seq-len", "--ops", "--precision", "--no-check", "--repeats", "--warmup",
        "--timing", "--json", "bf16,fp32", "% roof", "median"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
}

TEST(KernelsCli, UnknownCommandListsIt) {
  const RunResult r = run_tinyllama("fly");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("available: train, kernels"), std::string::npos) << r.err;
}

// One small op: on a machine without a GPU this is the one-line refusal;
// on a GPU machine it is a real (short) bench run.
TEST(KernelsCli, ValidCommandLineNeedsAGpu) {
  const RunResult r = run_tinyllama(
      "kernels --config workshop --precision fp32 --ops residual_add --repeats 2 --warmup 1");
  if (cuda_device_available()) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("residual_add"), std::string::npos) << r.out;
    return;
  }
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.err.find("no CUDA device found") != std::string::npos ||
              r.err.find("no CUDA backend") != std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace tinyllama::testing
