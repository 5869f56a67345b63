// --data-seed: the data order apart from the initial weights. The default
// is --seed's order; another data seed draws other batches, another --seed
// under the same data seed other weights; a resume under another data seed
// is refused naming the flag.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "run_binary.h"

namespace tinyllama::testing {
namespace {

namespace fs = std::filesystem;

const std::string kRun =
    "train --device cpu --vocab-size 64 --hidden-dim 32 --num-layers 2 --num-heads 4 "
    "--seq-len 8 --batch-size 3 --warmup-steps 0 --num-steps 3 --log-every 1 ";

nlohmann::json report(const std::string& flags, const fs::path& json) {
  const RunResult r = run_tinyllama(kRun + flags + " --json " + json.string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(read_text(json));
}

TEST(DataSeed, OrdersTheDataApartFromTheWeights) {
  const auto dir = scratch_dir("data_seed");
  const nlohmann::json a = report("--seed 5", dir / "a.json");
  const nlohmann::json same = report("--seed 5 --data-seed 5", dir / "same.json");
  const nlohmann::json other_data = report("--seed 5 --data-seed 6", dir / "d.json");
  const nlohmann::json other_weights = report("--seed 6 --data-seed 5", dir / "w.json");
  EXPECT_EQ(a["losses"], same["losses"]);  // the default is --seed's order
  EXPECT_EQ(a["config"]["data_seed"], 5);
  EXPECT_EQ(other_data["config"]["data_seed"], 6);
  EXPECT_NE(a["losses"], other_data["losses"]);
  EXPECT_NE(a["losses"], other_weights["losses"]);
  fs::remove_all(dir);
}

TEST(DataSeed, AResumeUnderAnotherDataSeedIsRefused) {
  const auto dir = scratch_dir("data_seed_resume");
  const std::string ck = (dir / "ck").string();
  ASSERT_EQ(run_tinyllama(kRun + "--data-seed 3 --num-steps 1 --checkpoint-dir " + ck).exit_code,
            0);
  const RunResult r = run_tinyllama(kRun + "--data-seed 4 --resume " + ck);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--data-seed"), std::string::npos) << r.err;
  EXPECT_EQ(run_tinyllama(kRun + "--data-seed 3 --resume " + ck).exit_code, 0);
  fs::remove_all(dir);
}

TEST(DataSeed, ABadValueIsRefused) {
  const RunResult r = run_tinyllama(kRun + "--data-seed -1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--data-seed"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tinyllama::testing
