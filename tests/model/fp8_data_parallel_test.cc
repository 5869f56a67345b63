// Delayed FP8 scaling on data-parallel ranks (Model::reduce_fp8_amaxes), on
// the CPU with its emulated FP8 GEMMs: two ranks (threads joined by
// ThreadCollectives) each step on half of every global batch, and one model
// steps on the whole of it, all from the same weights and the same scaling
// history. After each step every rank holds the same scaling state; after
// the first, its forward operands' amaxes (x, W) are the whole batch's,
// as the one model records them: with the same scales, each row's codes
// are the same in both. (Without the reduction each rank would hold the
// amaxes of its own half.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "fp8_test_config.h"
#include "model/data_parallel.h"
#include "model/fp8_plan.h"
#include "model/init.h"
#include "model/model.h"
#include "model/test_plans.h"
#include "ops/linear/fp8_tensor.h"
#include "random_batch.h"
#include "thread_collectives.h"

namespace tinyllama {
namespace {

// Each rank's token count (kLocalBatch x kSeq) a multiple of 16 too.
constexpr int kWorld = 2;
constexpr int kLocalBatch = 2;
constexpr int kSeq = 16;
constexpr int kSteps = 3;

// Each step's scaling state (Model::fp8_scaling_state).
using States = std::vector<std::vector<float>>;

// `history`: a scaling state every model starts from (else none).
States run(int batch, const DataParallel& dp, Collectives* comm, const std::vector<float>& history,
           int steps = kSteps) {
  const ModelConfig cfg = fp8_test_config();
  const BatchShape shape{batch, kSeq};
  CpuBackend cpu;
  StepPlan plan = test_plan("v4", Precision::fp64(), cpu, cfg, shape);
  plan.fp8 = choose_fp8_linears(cfg, shape, Fp8Choice::All, Fp8Scaling::Delayed);
  if (plan.ops.swiglu == SwigluImpl::Gemm) plan.ops.swiglu = SwigluImpl::Fused;
  plan.parallel = dp;
  Model model(cfg, shape, plan, cpu, comm);
  model.set_params(initial_weights(model.layout(), 21));
  if (!history.empty()) model.set_fp8_scaling_state(history);
  const int rank = comm != nullptr ? comm->rank() : 0;
  const std::size_t row = kSeq + 1;
  States states;
  for (int step = 1; step <= steps; ++step) {
    const std::vector<std::int32_t> global =
        random_rows(kWorld * kLocalBatch, kSeq, cfg.vocab_size, 40 + step);
    const auto first = global.begin() + static_cast<std::ptrdiff_t>(rank * batch * row);
    model.set_batch(
        std::vector<std::int32_t>(first, first + static_cast<std::ptrdiff_t>(batch * row)));
    AdamWHyper hp;
    hp.lr = 1e-2f;
    hp.step = step;
    model.stage_step(1.0f, false, hp);
    model.forward_pass();
    model.backward_pass(/*update_layers=*/true);
    model.optimizer_pass();
    states.push_back(model.fp8_scaling_state());
  }
  return states;
}

std::vector<States> run_ranks(const std::vector<float>& history) {
  std::vector<States> ranks(kWorld);
  const std::vector<std::string> errors =
      run_on_threads(kWorld, [&](ThreadCollectives& comm, int rank) {
        ranks[rank] = run(kLocalBatch, DataParallel{kWorld, true, true}, &comm, history);
      });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
  return ranks;
}

TEST(Fp8DataParallel, RanksKeepOneDelayedScalingHistoryTheWholeBatchs) {
  // One step of the one model makes a history every run starts from.
  const std::vector<float> history =
      run(kWorld * kLocalBatch, DataParallel{}, nullptr, {}, /*steps=*/1)[0];
  const std::vector<States> ranks = run_ranks(history);
  const States one = run(kWorld * kLocalBatch, DataParallel{}, nullptr, history);
  ASSERT_EQ(ranks[0].size(), static_cast<std::size_t>(kSteps));
  for (int step = 0; step < kSteps; ++step) {
    ASSERT_FALSE(ranks[0][step].empty());
    EXPECT_EQ(ranks[1][step], ranks[0][step])
        << "step " << step + 1 << ": the ranks' states differ";
  }
  const std::vector<float>& dp = ranks[0][0];
  const std::vector<float>& whole = one[0];
  ASSERT_EQ(dp.size(), whole.size());
  const ModelConfig cfg = fp8_test_config();
  const int forward_blocks = cfg.num_layers * kLinearKinds * 2;  // x's and W's (E4M3), first
  for (int b = 0; b < forward_blocks; ++b) {
    const float want = whole[static_cast<std::size_t>(b) * kFp8Block + kFp8Amax];
    ASSERT_GT(want, 0.0f) << "block " << b << " recorded no amax";
    EXPECT_NEAR(dp[static_cast<std::size_t>(b) * kFp8Block + kFp8Amax], want, 1e-6 * want)
        << "block " << b;
  }
  // The gradients' amaxes (E5M2) differ: each rank's loss is the mean over
  // its own tokens, twice the whole batch's gradient, cast with the same
  // scale. They are reduced all the same: positive and alike on both ranks.
  for (std::size_t at = forward_blocks * kFp8Block; at < dp.size(); at += kFp8Block) {
    EXPECT_GT(dp[at + kFp8Amax], 0.0f) << "block " << at / kFp8Block;
  }
}

}  // namespace
}  // namespace tinyllama
