// tune's arithmetic: the largest batch under a target is exact (it fits and
// one more does not), the candidates, the batch list's rules and the pick.
#include "train/batch_tune.h"

#include <gtest/gtest.h>

#include "core/errors.h"
#include "model/model.h"
#include "train/backend_factory.h"

namespace tinyllama {
namespace {

TrainOptions small_run() {
  TrainOptions o;
  o.model.vocab_size = 64;
  o.model.hidden_dim = 32;
  o.model.num_layers = 2;
  o.model.num_heads = 4;
  o.model.num_kv_heads = 2;
  o.model.ffn_dim = 96;
  o.shape = {1, 16};
  o.request.level = "v1";
  o.request.ops = level_preset("v1");
  o.plan.device = DeviceKind::Cpu;
  return o;
}

TEST(BatchTune, ThePredictionIsThePlansMemoryAtThatBatch) {
  const TrainOptions o = small_run();
  for (const int b : {1, 3, 17}) {
    const BatchShape shape{b, o.shape.seq};
    const StepPlan plan = resolve_plan(o.request, device_caps(DeviceKind::Cpu), o.model, shape);
    EXPECT_EQ(predicted_peak_bytes(o, b), Model::estimate_memory(o.model, shape, plan).total());
  }
  EXPECT_LT(predicted_peak_bytes(o, 2), predicted_peak_bytes(o, 3));
}

TEST(BatchTune, TheLargestBatchFitsAndOneMoreDoesNot) {
  const TrainOptions o = small_run();
  const std::int64_t one = predicted_peak_bytes(o, 1);
  for (const double factor : {1.0, 1.7, 5.3, 20.0}) {
    const auto target = static_cast<std::int64_t>(static_cast<double>(one) * factor);
    const int largest = largest_fitting_batch(o, target, 1000);
    ASSERT_GE(largest, 1) << factor;
    EXPECT_LE(predicted_peak_bytes(o, largest), target) << factor;
    EXPECT_GT(predicted_peak_bytes(o, largest + 1), target) << factor;
  }
  EXPECT_EQ(largest_fitting_batch(o, one - 1, 1000), 0);
  // Capped by the limit (the data pool's rows) however large the target.
  EXPECT_EQ(largest_fitting_batch(o, std::int64_t{1} << 50, 37), 37);
}

TEST(BatchTune, CandidatesArePowersOfTwoAndTheLargest) {
  EXPECT_EQ(candidate_batches({}, 12), (std::vector<int>{1, 2, 4, 8, 12}));
  EXPECT_EQ(candidate_batches({}, 16), (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_EQ(candidate_batches({}, 1), (std::vector<int>{1}));
  EXPECT_TRUE(candidate_batches({}, 0).empty());
  EXPECT_EQ(candidate_batches({3, 5}, 4), (std::vector<int>{3, 5}));
}

TEST(BatchTune, BatchListsAreIncreasingPositiveIntegers) {
  EXPECT_EQ(parse_batch_list("1,2,8"), (std::vector<int>{1, 2, 8}));
  for (const char* bad : {"", "2,1", "1,1", "0,4", "a", "1,,2", "-1"}) {
    EXPECT_THROW(parse_batch_list(bad), UsageError) << bad;
  }
}

TEST(BatchTune, TheBestIsTheMeasuredPointWithTheMostTokensPerSecond) {
  std::vector<TunePoint> points(4);
  points[0].measured = true;
  points[0].tokens_per_s = 100;
  points[1].measured = false;  // a failed run, whatever its number
  points[1].tokens_per_s = 1e9;
  points[2].measured = true;
  points[2].tokens_per_s = 300;
  points[3].measured = true;
  points[3].tokens_per_s = 200;
  EXPECT_EQ(best_point(points), 2);
  EXPECT_EQ(best_point({}), -1);
}

}  // namespace
}  // namespace tinyllama
