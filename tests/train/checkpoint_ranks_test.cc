// A checkpoint resumes on another number of ranks when the global batch
// (--batch-size per rank times the ranks) is the same: the sampler draws that
// many rows a step, whatever the ranks. The check itself needs no GPU: the
// run's options are all it reads (the weights go through the canonical
// layout, tested with the data-parallel model).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/errors.h"
#include "cpu/cpu_backend.h"
#include "model/init.h"
#include "model/model.h"
#include "model/test_plans.h"
#include "train/checkpoint.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 29;
  c.hidden_dim = 24;
  c.num_layers = 1;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.ffn_dim = 20;
  return c;
}

// The options of a run of `ranks` ranks at `batch` rows each (1: one process).
TrainOptions run_options(const Backend& backend, int batch, int ranks) {
  TrainOptions o;
  o.model = small_config();
  o.shape = {batch, 7};
  o.plan = test_plan("v2", Precision::fp32(), backend, o.model, o.shape);
  if (ranks > 1) o.plan.parallel = DataParallel{ranks, true, true};
  return o;
}

class CheckpointRanks : public ::testing::Test {
 protected:
  void SetUp() override {
    // Per process and test: ctest runs this fixture's tests side by side,
    // and one's TearDown must not remove another's directory.
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tinyllama_ckpt_ranks_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A checkpoint saved by a run of `ranks` ranks at `batch` rows each.
  std::string save(int batch, int ranks) {
    const TrainOptions o = run_options(cpu_, batch, ranks);
    Model model(o.model, {batch, 7}, run_options(cpu_, batch, 1).plan, cpu_);
    model.set_params(initial_weights(model.layout(), 5));
    return save_checkpoint(dir_.string(), model, CheckpointState{}, o, 0);
  }
  // Loads it as a run of `ranks` ranks at `batch` rows each; the error, or "".
  std::string load(const std::string& path, int batch, int ranks) {
    const TrainOptions o = run_options(cpu_, batch, ranks);
    Model model(o.model, {batch, 7}, run_options(cpu_, batch, 1).plan, cpu_);
    try {
      load_checkpoint(path, model, o);
    } catch (const UsageError& e) {
      return e.what();
    }
    return "";
  }

  CpuBackend cpu_;
  fs::path dir_;
};

TEST_F(CheckpointRanks, ResumesOnAnyRankCountWithTheSameGlobalBatch) {
  const std::string two_ranks = save(4, 2);
  EXPECT_EQ(load(two_ranks, 8, 1), "");  // one process, 8 rows
  EXPECT_EQ(load(two_ranks, 2, 4), "");  // four ranks of 2
  EXPECT_EQ(load(two_ranks, 4, 2), "");
  const std::string one = save(8, 1);
  EXPECT_EQ(load(one, 4, 2), "");
}

TEST_F(CheckpointRanks, AnotherGlobalBatchIsRefusedSayingWhichRowsPerStep) {
  const std::string two_ranks = save(4, 2);
  const std::string alone = load(two_ranks, 4, 1);
  EXPECT_NE(alone.find("--batch-size 4: the checkpoint"), std::string::npos) << alone;
  EXPECT_NE(alone.find("was saved with --batch-size 8 (rows per step over all ranks)"),
            std::string::npos)
      << alone;
  const std::string four = load(two_ranks, 4, 4);
  EXPECT_NE(four.find("--batch-size 4 on 4 ranks (16 rows per step)"), std::string::npos) << four;
  EXPECT_NE(four.find("was saved with 8 rows per step"), std::string::npos) << four;
}

}  // namespace
}  // namespace tinyllama
