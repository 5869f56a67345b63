#include <gtest/gtest.h>

#include "train/run_setup.h"
#include "train/synthetic_data.h"
#include "train/trainer.h"

namespace tinyllama {
namespace {

TrainOptions small_cpu_run() {
  TrainOptions o;
  o.model.vocab_size = 64;
  o.model.hidden_dim = 32;
  o.model.num_layers = 2;
  o.model.num_heads = 4;
  o.model.num_kv_heads = 2;
  o.model.ffn_dim = 64;
  o.shape = {4, 16};
  o.device_request = DeviceKind::Cpu;
  o.request.level = "v1";
  o.request.ops = level_preset("v1");
  o.warmup_steps = 0;
  resolve_run(o);
  return o;
}

// With a pool of a few rows the model can memorise its data: the loss must
// fall far below the uniform-guess level ln(vocab).
TEST(Trainer, LossFallsWhenMemorisingASmallPool) {
  TrainOptions o = small_cpu_run();
  o.data_pool_rows = 4;
  o.num_steps = 150;
  o.learning_rate = 3e-3;
  const TrainSummary s = train(o, nullptr);
  ASSERT_EQ(s.steps.size(), 150u);
  EXPECT_GT(s.steps.front().loss, 3.5);  // about ln(64) = 4.16 at the start
  EXPECT_LT(s.final_loss, 1.0);
}

TEST(Trainer, SummaryCountsOnlyTimedSteps) {
  TrainOptions o = small_cpu_run();
  o.warmup_steps = 2;
  o.num_steps = 3;
  int calls = 0;
  const TrainSummary s =
      train(o, [&](const StepRecord& r, const TrainOptions&, const TrainSummary&) {
        ++calls;
        EXPECT_EQ(r.step, calls);
        EXPECT_GT(r.ms, 0.0);
      });
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(s.steps.size(), 3u);
  EXPECT_GT(s.samples_per_s, 0.0);
  EXPECT_NEAR(s.tokens_per_s, s.samples_per_s * 16, 1e-6 * s.tokens_per_s);
  EXPECT_GT(s.peak_mb, 0.0);
}

TEST(SyntheticData, RowsAreDistinctInRangeAndReproducible) {
  SyntheticData a(50, 9, 20, 77);
  SyntheticData b(50, 9, 20, 77);
  for (int step = 0; step < 5; ++step) {
    const auto ra = a.next_batch(20);  // the whole pool: every row exactly once
    EXPECT_EQ(ra, b.next_batch(20));
    std::vector<std::vector<std::int32_t>> seen;
    for (int r = 0; r < 20; ++r) {
      std::vector<std::int32_t> row(ra.begin() + r * 10, ra.begin() + (r + 1) * 10);
      for (auto t : row) {
        EXPECT_GE(t, 1);
        EXPECT_LT(t, 50);
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), row), 0);
      seen.push_back(row);
    }
  }
}

}  // namespace
}  // namespace tinyllama
