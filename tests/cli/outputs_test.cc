// What a run does with its output paths and with a run that goes wrong:
// bad paths refused before training (exit 2 naming the flag), devices
// written through and never replaced, a failed save that keeps the summary
// and the JSON report, the divergence guard and non-finite --init-from weights.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_binary.h"

namespace tinyllama::testing {
namespace {

namespace fs = std::filesystem;

const std::string kTiny =
    "train --device cpu --vocab-size 40 --hidden-dim 32 --num-layers 1 --num-heads 4 --seq-len 8 "
    "--batch-size 2 --num-steps 3 --warmup-steps 0 ";

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Outputs, BadPathsAreRefusedBeforeTrainingNamingTheFlag) {
  const auto dir = scratch_dir("bad_paths");
  fs::create_directories(dir / "sub");
  const std::string missing = (dir / "nope" / "r.json").string();
  RunResult r = run_tinyllama(kTiny + "--json " + missing);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--json " + missing + ": directory")) << r.err;
  EXPECT_FALSE(contains(r.out, "step 1/3")) << "refused before training";

  r = run_tinyllama(kTiny + "--save-weights " + (dir / "sub").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--save-weights")) << r.err;
  EXPECT_TRUE(contains(r.err, "is a directory")) << r.err;

  r = run_tinyllama(kTiny + "--json /proc/self/r.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "--json /proc/self/r.json: cannot create a file")) << r.err;

  const std::string same = (dir / "x").string();
  r = run_tinyllama(kTiny + "--json " + same + " --save-weights " + (dir / "." / "x").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "the same file as --save-weights")) << r.err;
  EXPECT_FALSE(fs::exists(same));
  fs::remove_all(dir);
}

TEST(Outputs, DevNullIsWrittenThroughAndALongNameWorks) {
  const auto dir = scratch_dir("dev_null");
  const std::string long_name = (dir / std::string(253, 'w')).string();
  const RunResult r = run_tinyllama(kTiny + "--json /dev/null --save-weights " + long_name);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null must stay a device";
  EXPECT_GT(fs::file_size(long_name), 1000u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1)
      << "no temporary file left";
  fs::remove_all(dir);
}

TEST(Outputs, JsonToStdoutFollowsTheSummary) {
  const RunResult r = run_tinyllama(kTiny + "--json /dev/stdout");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::size_t at = r.out.find("\n{");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_TRUE(contains(r.out.substr(0, at), "summary over 3 timed steps"));
  const std::string json = r.out.substr(at + 1, r.out.rfind('}') - at);
  EXPECT_EQ(nlohmann::json::parse(json)["losses"].size(), 3u);
}

TEST(Outputs, AFailedSaveStillPrintsTheSummaryAndWritesTheJson) {
  const auto dir = scratch_dir("failed_save");
  const std::string report = (dir / "r.json").string();
  // /dev/full passes every check and fails the write (no space left).
  const RunResult r = run_tinyllama(kTiny + "--save-weights /dev/full --json " + report);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.out, "summary over 3 timed steps")) << r.out;
  EXPECT_TRUE(contains(r.err, "--save-weights: /dev/full: cannot write")) << r.err;
  ASSERT_TRUE(fs::exists(report));
  EXPECT_EQ(nlohmann::json::parse(read_text(report))["losses"].size(), 3u);
  fs::remove_all(dir);
}

TEST(Outputs, ANonFiniteLossStopsTheRunNamingTheStep) {
  const auto dir = scratch_dir("diverge");
  const std::string report = (dir / "r.json").string();
  const RunResult r = run_tinyllama(kTiny + "--num-steps 20 --learning-rate 1e30 --json " + report);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_TRUE(contains(r.err, "error: diverged at step ")) << r.err;
  EXPECT_TRUE(contains(r.err, "(last finite loss ")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  const nlohmann::json j = nlohmann::json::parse(read_text(report));
  EXPECT_LT(j["losses"].size(), 20u) << "stopped early";
  EXPECT_TRUE(std::isfinite(j["losses"][0].get<double>()));
  fs::remove_all(dir);
}

TEST(Outputs, InitFromRefusesNonFiniteWeightsNamingTheTensor) {
  const auto dir = scratch_dir("nan_init");
  const std::string weights = (dir / "w.safetensors").string();
  ASSERT_EQ(run_tinyllama(kTiny + "--save-weights " + weights).exit_code, 0);
  {
    // The last tensor in the file is the final norm: its last float becomes NaN.
    std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-4, std::ios::end);
    const float nan = std::nanf("");
    f.write(reinterpret_cast<const char*>(&nan), 4);
  }
  const RunResult r = run_tinyllama(kTiny + "--init-from " + weights);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, weights + ": model.norm.weight holds a non-finite value (nan)"))
      << r.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tinyllama::testing
