// Every bad command line gets one line on stderr naming the flag, the value
// and what is allowed, and exit code 2, before anything is allocated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <string>

#include "run_binary.h"

namespace tinyllama::testing {
namespace {

// A tiny valid model so that only the flag under test is wrong.
const std::string kSmall =
    "train --device cpu --vocab-size 50 --hidden-dim 32 --num-layers 1 --num-heads 4 --seq-len 8 "
    "--batch-size 2 --num-steps 2 --warmup-steps 0 ";

struct BadFlag {
  std::string args;      // appended to kSmall (later flags win)
  std::string expected;  // a substring the one-line error must contain
};

class Validation : public ::testing::TestWithParam<BadFlag> {};

TEST_P(Validation, OneLineAndExitCode2) {
  const BadFlag c = GetParam();
  const RunResult r = run_tinyllama(kSmall + c.args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(c.expected), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "stderr: " << r.err;
  EXPECT_EQ(r.out.find("step "), std::string::npos) << "nothing may run: " << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    EveryRule, Validation,
    ::testing::Values(
        BadFlag{"--hidden-dim 30", "--hidden-dim 30: must be divisible by --num-heads 4"},
        BadFlag{"--hidden-dim 36 --num-heads 4", "head_dim must be even"},
        BadFlag{"--num-kv-heads 3", "--num-heads 4: must be divisible by --num-kv-heads 3"},
        BadFlag{"--num-layers 0", "--num-layers 0: must be at least 1"},
        BadFlag{"--num-heads 0", "--num-heads 0: must be at least 1"},
        BadFlag{"--num-kv-heads 0", "--num-kv-heads 0: must be at least 1"},
        BadFlag{"--ffn-dim -3", "--ffn-dim -3: must be at least 1"},
        BadFlag{"--hidden-dim 0", "--hidden-dim 0: must be at least 1"},
        BadFlag{"--batch-size 0", "--batch-size 0: must be at least 1"},
        BadFlag{"--num-steps 0", "--num-steps 0: must be at least 1"},
        BadFlag{"--seq-len 1", "--seq-len 1: must be at least 2"},
        BadFlag{"--vocab-size 1", "--vocab-size 1: must be at least 2"},
        BadFlag{"--batch-size 12abc", "--batch-size 12abc: expected an integer"},
        BadFlag{"--seq-len 1.5", "--seq-len 1.5: expected an integer"},
        BadFlag{"--learning-rate fast", "--learning-rate fast:"},
        BadFlag{"--learning-rate -1", "--learning-rate -1: must be a finite number above 0"},
        BadFlag{"--device tpu", "--device tpu:"}, BadFlag{"--amp-dtype fp8", "--amp-dtype fp8:"},
        BadFlag{"--version v9", "--version v9"},
        BadFlag{"--fp8-scaling sometimes", "--fp8-scaling sometimes: allowed values are current"},
        BadFlag{"--fp8-scaling current", "--fp8-scaling: only under --use-amp --amp-dtype float8"},
        BadFlag{"--activations all",
                "--activations all: allowed values are stored, "
                "recompute_norms, recompute"},
        BadFlag{"--enable-qkv-fusion --disable-qkv-fusion", "contradictory"},
        BadFlag{"--enable-fused-optimizer --disable-fused-optimizer", "contradictory"},
        BadFlag{"--use-amp", "--use-amp: mixed precision needs --device cuda"},
        BadFlag{"--bogus 3", "--bogus: unknown flag"},
        BadFlag{"--seq-len", "--seq-len: missing value"},
        BadFlag{"--init-from /nonexistent/w.safetensors", "no such file"},
        BadFlag{"--export-hf /dev/null", "--export-hf /dev/null: exists and is not a directory"},
        BadFlag{"--json /nonexistent/dir/r.json", "does not exist"}),
    [](const auto& info) {
      std::string name;
      for (char ch : info.param.args)
        name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
      return name;
    });

TEST(Cli, UnknownCommandIsAUsageError) {
  const RunResult r = run_tinyllama("fly");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command"), std::string::npos) << r.err;
}

TEST(Cli, NoCommandIsAUsageError) {
  const RunResult r = run_tinyllama("");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("missing command"), std::string::npos) << r.err;
}

TEST(Cli, RefusesARunThatCannotFitWithNeededAndAvailable) {
  // ~1.6e12 parameters: no host this runs on has that much memory.
  const RunResult r = run_tinyllama(
      "train --device cpu --vocab-size 1000 --hidden-dim 400000 --num-heads 4 --num-layers 2 "
      "--ffn-dim 1000000 --seq-len 8 --batch-size 1 --num-steps 1");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("needs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("available"), std::string::npos) << r.err;
}

TEST(Cli, VersionPrintsVersionAndCudaBuildInfo) {
  const RunResult r = run_tinyllama("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("tinyllama 0."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CUDA"), std::string::npos) << r.out;
}

TEST(Cli, HelpDocumentsEveryFlagWithItsDefault) {
  const RunResult r = run_tinyllama("train --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--vocab-size",
                           "--hidden-dim",
                           "--num-layers",
                           "--num-heads",
                           "--num-kv-heads",
                           "--ffn-dim",
                           "--seq-len",
                           "--batch-size",
                           "--num-steps",
                           "--warmup-steps",
                           "--learning-rate",
                           "--seed",
                           "--device",
                           "--version",
                           "--use-amp",
                           "--amp-dtype",
                           "--log-every",
                           "--json",
                           "--save-weights",
                           "--init-from",
                           "--export-hf",
                           "--enable-qkv-fusion",
                           "--enable-fused-optimizer",
                           "--disable-all-fusion"}) {
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
  }
  for (const char* default_value : {"1000", "512", "256", "3e-4", "1234", "4*D", "bfloat16"}) {
    EXPECT_NE(r.out.find(default_value), std::string::npos) << default_value;
  }
}

}  // namespace
}  // namespace tinyllama::testing
