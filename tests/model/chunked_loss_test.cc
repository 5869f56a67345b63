// LossImpl::Chunked against FullLogits in float64: the same losses and
// gradients whatever the chunk size (one row, a chunk that does not divide
// the rows, all rows), through both ways the head's backward runs: inside
// the training forward pass (forward_pass after stage_step) and recomputed
// by backward_pass after a loss-only forward().
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "cpu/cpu_backend.h"
#include "model/init.h"
#include "model/model.h"
#include "model/test_plans.h"

namespace tinyllama {
namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 29;  // padded to 128 columns: the padding must stay out of the loss
  c.hidden_dim = 12;
  c.num_layers = 2;
  c.num_heads = 3;
  c.num_kv_heads = 1;
  c.ffn_dim = 10;
  return c;
}

struct Result {
  double loss = 0;
  std::vector<double> grads;
};

Result run(LossImpl loss, std::int64_t chunk_rows, bool whole_step) {
  const ModelConfig cfg = small_config();
  const BatchShape shape{3, 7};
  CpuBackend backend;
  PlanRequest request;
  request.level = "custom";
  request.ops = level_preset("v2");
  request.ops.loss = loss;
  request.precision = Precision::fp64();
  request.loss_chunk_rows = chunk_rows;
  const StepPlan plan = resolve_plan(request, graph_capable_cpu_caps(), cfg, shape);
  if (loss == LossImpl::Chunked) {
    EXPECT_EQ(plan.loss_chunk_rows, std::min<std::int64_t>(chunk_rows, shape.tokens()));
  }
  Model model(cfg, shape, plan, backend);
  std::vector<double> w = initial_weights(model.layout(), 11);
  Rng rng(5);
  for (double& v : w) v += 0.1 * rng.normal();  // norm weights off 1, embeddings larger
  model.set_params(w);
  std::vector<std::int32_t> rows(static_cast<std::size_t>(shape.batch * (shape.seq + 1)));
  for (auto& t : rows) t = static_cast<std::int32_t>(rng.below(cfg.vocab_size));
  model.set_batch(rows);
  const float scale = 8.0f;  // a loss scale the gradients must carry through every chunk
  if (whole_step) {
    model.stage_step(scale, false, AdamWHyper{});
    model.forward_pass();
    model.backward_pass(/*update_layers=*/false);
  } else {
    model.forward();
    model.backward(scale, false);
  }
  return {model.loss(), model.grads()};
}

TEST(ChunkedLoss, MatchesFullLogitsForEveryChunkSizeAndPath) {
  const Result ref = run(LossImpl::FullLogits, 0, false);
  double gmax = 0;
  for (double g : ref.grads) gmax = std::max(gmax, std::abs(g));
  ASSERT_GT(gmax, 0.0);
  for (std::int64_t chunk : {1, 4, 20, 21, 64}) {
    for (bool whole_step : {false, true}) {
      const Result r = run(LossImpl::Chunked, chunk, whole_step);
      EXPECT_NEAR(r.loss, ref.loss, 1e-12 * ref.loss) << "chunk " << chunk;
      ASSERT_EQ(r.grads.size(), ref.grads.size());
      double worst = 0;
      for (std::size_t i = 0; i < r.grads.size(); ++i) {
        worst = std::max(worst, std::abs(r.grads[i] - ref.grads[i]));
      }
      EXPECT_LT(worst, 1e-12 * gmax) << "chunk " << chunk << (whole_step ? " forward_pass" : "");
    }
  }
}

TEST(ChunkedLoss, ChunkRowsCoverTheRowsInFewChunksOfBoundedLogits) {
  ModelConfig gpt2;
  gpt2.vocab_size = 50257;
  gpt2.hidden_dim = 768;
  gpt2.num_heads = 12;
  const BatchShape big{16, 1024};
  const std::int64_t rows = loss_chunk_rows(gpt2, big, Precision::amp(DType::BF16));
  EXPECT_EQ(rows % 128, 0);
  const std::int64_t chunks = (big.tokens() + rows - 1) / rows;
  EXPECT_LE(rows * gpt2.padded_vocab() * 2, std::int64_t{512} << 20);
  EXPECT_EQ(chunks, 4) << "the fewest chunks of 512 MiB for 1.6 GB of logits";
  // The workshop's vocabulary of 1000: every row in one chunk.
  const ModelConfig workshop;
  EXPECT_EQ(loss_chunk_rows(workshop, {8, 128}, Precision::fp32()), 1024);
  // Logits under 512 MiB but over 256 (1 B: 8192 rows of 32 000 bf16, 500
  // MiB) in two chunks; 256 MiB or less in one.
  ModelConfig one_b = gpt2;
  one_b.vocab_size = 32000;
  EXPECT_EQ(loss_chunk_rows(one_b, {8, 1024}, Precision::amp(DType::BF16)), 4096);
  EXPECT_EQ(loss_chunk_rows(one_b, {4, 1024}, Precision::amp(DType::BF16)), 4096)
      << "250 MiB: one chunk";
}

}  // namespace
}  // namespace tinyllama
