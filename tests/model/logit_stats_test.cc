// Model::logit_stats (--log-logit-stats) and the exercise fault broken-init:
// the statistics scale exactly with the final norm's weight (the logits are
// linear in it), come out the same through a chunked loss buffer as through
// the full logits, and broken-init's draws are the init's own, unscaled.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <vector>

#include "core/errors.h"
#include "core/rng.h"
#include "cpu/cpu_backend.h"
#include "model/faults.h"
#include "model/init.h"
#include "model/model.h"

namespace tinyllama {
namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 37;
  c.hidden_dim = 24;
  c.num_layers = 2;
  c.num_heads = 3;
  c.num_kv_heads = 1;
  c.ffn_dim = 40;
  return c;
}

constexpr BatchShape kShape{3, 7};

// A model after its forward pass, or after its backward pass too (as the
// trainer takes the statistics, after the step). reader: the plan is
// resolved with the final norm's reader declared, as --log-logit-stats
// does; without, the final norm's output lies under the backward scratch.
struct StatsModel {
  CpuBackend backend;
  std::unique_ptr<Model> model;
};

std::unique_ptr<StatsModel> stats_model(LossImpl loss, double final_norm_scale, bool reader,
                                        bool after_backward) {
  const ModelConfig cfg = small_config();
  auto out = std::make_unique<StatsModel>();
  PlanRequest request;
  request.level = "custom";
  request.ops = level_preset("v2");
  request.ops.loss = loss;
  request.precision = Precision::fp64();
  request.loss_chunk_rows = 5;  // 21 rows: chunks of 5, the last of 1
  if (reader) request.final_norm_reader = "the logit statistics";
  const StepPlan plan = resolve_plan(request, DeviceCaps::cpu(), cfg, kShape);
  out->model = std::make_unique<Model>(cfg, kShape, plan, out->backend);
  Model& model = *out->model;
  std::vector<double> w = initial_weights(model.layout(), 3);
  const ParamSlot& fn = model.layout().final_norm();
  for (std::int64_t i = 0; i < fn.numel(); ++i) w[fn.offset + i] *= final_norm_scale;
  model.set_params(w);
  std::vector<std::int32_t> rows(static_cast<std::size_t>(kShape.batch * (kShape.seq + 1)));
  Rng rng(4);
  for (auto& t : rows) t = static_cast<std::int32_t>(1 + rng.below(36));
  model.set_batch(rows);
  model.forward();
  if (after_backward) model.backward(1.0f, false);
  return out;
}

LogitStats stats_of(LossImpl loss, double final_norm_scale, bool after_backward = false) {
  return stats_model(loss, final_norm_scale, true, after_backward)->model->logit_stats();
}

// The trainer takes them after the step: the final norm's output, which
// they read, keeps its bytes through the backward pass where the plan was
// told of the reader.
TEST(LogitStats, TheSameAfterTheBackwardPassAsAfterTheForward) {
  for (const LossImpl loss : {LossImpl::FullLogits, LossImpl::Chunked}) {
    const LogitStats forward = stats_of(loss, 1.0);
    const LogitStats step = stats_of(loss, 1.0, /*after_backward=*/true);
    EXPECT_EQ(step.mean, forward.mean);
    EXPECT_EQ(step.std, forward.std);
    EXPECT_EQ(step.max, forward.max);
  }
}

TEST(LogitStats, RefusedWhereTheFinalNormLiesUnderTheBackwardScratch) {
  const auto m = stats_model(LossImpl::Chunked, 1.0, /*reader=*/false, true);
  EXPECT_THROW(m->model->logit_stats(), std::logic_error);
}

TEST(LogitStats, ScaleExactlyWithTheFinalNormWeight) {
  const LogitStats one = stats_of(LossImpl::FullLogits, 1.0);
  const LogitStats two = stats_of(LossImpl::FullLogits, 2.0);
  EXPECT_GT(one.std, 0.0);
  EXPECT_GT(one.max, one.mean);
  EXPECT_NEAR(two.mean, 2 * one.mean, 1e-12 * std::abs(one.std));
  EXPECT_NEAR(two.std, 2 * one.std, 1e-12 * one.std);
  EXPECT_NEAR(two.max, 2 * one.max, 1e-12 * one.max);
}

TEST(LogitStats, ChunkedLossGivesTheFullLogitsStatistics) {
  const LogitStats full = stats_of(LossImpl::FullLogits, 1.0);
  const LogitStats chunked = stats_of(LossImpl::Chunked, 1.0);
  EXPECT_NEAR(chunked.mean, full.mean, 1e-12 * full.std);
  EXPECT_NEAR(chunked.std, full.std, 1e-12 * full.std);
  EXPECT_EQ(chunked.max, full.max);
}

TEST(BrokenInit, TheSameDrawsUnscaled) {
  const ParamLayout layout(small_config());
  const std::vector<double> good = initial_weights(layout, 9);
  const std::vector<double> broken = initial_weights(layout, 9, 1.0);
  for (const ParamSlot& s : layout.slots()) {
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      const auto k = static_cast<std::size_t>(s.offset + i);
      if (s.is_norm) {
        EXPECT_EQ(broken[k], 1.0);
      } else {
        // Each value rounded to fp32 from its draw: 0.02 x the same draw.
        EXPECT_NEAR(good[k], kInitStddev * broken[k], 1e-7 * std::abs(broken[k]) + 1e-12);
      }
    }
  }
}

TEST(Faults, NamesParseAloneOrCommaSeparated) {
  InjectedFaults f;
  EXPECT_FALSE(f.any());
  add_fault(f, "naive-swiglu,broken-init");
  add_fault(f, "unsynced-timing");
  EXPECT_TRUE(f.broken_init && f.naive_swiglu && f.unsynced_timing);
  EXPECT_FALSE(f.noncontiguous_kv);
  EXPECT_EQ(f.names(),
            (std::vector<std::string>{"broken-init", "unsynced-timing", "naive-swiglu"}));
  try {
    add_fault(f, "slow-init");
    FAIL() << "an unknown fault was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--inject slow-init: allowed values are broken-init, "
                                         "noncontiguous-kv, unsynced-timing, naive-swiglu"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tinyllama
