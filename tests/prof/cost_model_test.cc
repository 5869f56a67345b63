// The cost model against counts worked out by hand for a tiny config, and
// the whole step against the literature's 6·N·T + attention term; then the
// join that makes the per-op figures meaningful: the ops the model passes
// mark are exactly the ops the cost model lists, at every level.
#include "prof/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "model/init.h"
#include "model/model.h"
#include "model/test_plans.h"
#include "ops/embedding/embedding_chunks.h"
#include "ops/norm/rmsnorm_partials.h"
#include "prof/host_ranges.h"

namespace tinyllama::prof {
namespace {

// V10 D8 L1 H2 K1 (hd 4) F12, B2 S3: T = 6 tokens, qkv width (2+2)*4 = 16.
ModelConfig tiny() {
  ModelConfig c;
  c.vocab_size = 10;
  c.hidden_dim = 8;
  c.num_layers = 1;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.ffn_dim = 12;
  return c;
}
constexpr BatchShape kTinyShape{2, 3};

// A plan with the choices as given (the per-layer sweeps kept: the cost
// model counts what a captured step runs).
StepPlan plan_of(const OpChoices& ops, Precision precision) {
  return graph_plan(ops, precision, tiny(), kTinyShape);
}

// By value: GCC 13 cannot see that the result outlives the temporary path.
OpCost op(const StepCost& c, const std::string& path) {
  const OpCost* o = c.find(path);
  if (o == nullptr) throw std::runtime_error("no op " + path);
  return *o;
}

TEST(CostModel, FusedGemmsMatchHandCounts) {
  const StepCost c = step_cost(tiny(), kTinyShape, plan_of(level_preset("v2"), Precision::fp32()));
  // Forward QKV: 2*T*D*16 FLOPs; reads x [6,8] and W [16,8], writes [6,16], fp32.
  const OpCost qkv = op(c, "forward/layer0/qkv_gemm");
  EXPECT_EQ(qkv.kind, OpKind::Gemm);
  EXPECT_EQ(qkv.flops, 2 * 6 * 8 * 16);
  EXPECT_EQ(qkv.bytes, (48 + 128 + 96) * 4);
  EXPECT_EQ(qkv.write_bytes, 96 * 4);
  EXPECT_EQ(qkv.read_bytes(), (48 + 128) * 4);
  EXPECT_EQ(qkv.gemm_calls, 1);
  // dgrad reads dy [6,16] and W, writes dx [6,8]; wgrad reads dy and x, writes dW.
  EXPECT_EQ(op(c, "backward/layer0/qkv_gemm_dgrad").flops, 1536);
  EXPECT_EQ(op(c, "backward/layer0/qkv_gemm_dgrad").bytes, (96 + 128 + 48) * 4);
  EXPECT_EQ(op(c, "backward/layer0/qkv_gemm_wgrad").bytes, (96 + 48 + 128) * 4);
  // The tied LM head: 2*T*D*V each way.
  EXPECT_EQ(op(c, "forward/lm_head_gemm").flops, 2 * 6 * 8 * 10);
  EXPECT_EQ(op(c, "backward/lm_head_gemm_wgrad").flops, 960);
  EXPECT_EQ(op(c, "forward/layer0/gate_up_gemm").flops, 2 * 6 * 8 * 24);
  EXPECT_EQ(op(c, "forward/layer0/down_gemm").flops, 2 * 6 * 12 * 8);
  EXPECT_EQ(op(c, "forward/layer0/out_proj_gemm").flops, 2 * 6 * 8 * 8);
}

TEST(CostModel, UnfusedGemmsReadTheirInputOncePerSliceAndAccumulateDgrad) {
  const StepCost c = step_cost(tiny(), kTinyShape, plan_of(level_preset("v1"), Precision::fp32()));
  const OpCost qkv = op(c, "forward/layer0/qkv_gemm");
  EXPECT_EQ(qkv.flops, 1536);  // the same work as one fused GEMM
  EXPECT_EQ(qkv.gemm_calls, 3);
  // q: x + Wq [8,8] + y [6,8]; k and v: x + [4,8] + [6,4].
  EXPECT_EQ(qkv.bytes, (48 + 64 + 48) * 4 + 2 * (48 + 32 + 24) * 4);
  // The k and v dgrads accumulate into dx (beta = 1): they read it too.
  EXPECT_EQ(op(c, "backward/layer0/qkv_gemm_dgrad").bytes,
            (48 + 64 + 48) * 4 + 2 * ((24 + 32 + 48) * 4 + 48 * 4));
  EXPECT_EQ(op(c, "backward/layer0/qkv_gemm_dgrad").write_bytes, 3 * 48 * 4);
  // Unfused SwiGLU writes silu(g) and reads it back: 5 tensors of [6,12].
  EXPECT_EQ(op(c, "forward/layer0/swiglu").bytes, 5 * 6 * 12 * 4);
  EXPECT_EQ(op(c, "forward/layer0/swiglu").write_bytes, 2 * 6 * 12 * 4);
  EXPECT_EQ(op(c, "backward/layer0/swiglu").bytes, 9 * 6 * 12 * 4);
  EXPECT_EQ(op(c, "backward/layer0/swiglu").write_bytes, 3 * 6 * 12 * 4);
}

TEST(CostModel, CausalAttentionCountsHalfTheSquare) {
  const StepCost flash =
      step_cost(tiny(), kTinyShape, plan_of(level_preset("v2"), Precision::fp32()));
  // 2 products * 2*B*H*S^2*hd * 1/2 = 2*2*2*9*4.
  EXPECT_EQ(op(flash, "forward/layer0/attention").flops, 288);
  EXPECT_EQ(op(flash, "backward/layer0/attention").flops, 576);
  // Reads q [6,8], k, v [6,4], writes out [6,8] and lse [B*H, S] (fp32).
  EXPECT_EQ(op(flash, "forward/layer0/attention").bytes, (96 + 48) * 4 + 12 * 4);
  EXPECT_EQ(op(flash, "forward/layer0/attention").write_bytes, (48 + 12) * 4);
  // Materialised attention also saves the probabilities [B*H*S, S].
  const StepCost mat =
      step_cost(tiny(), kTinyShape, plan_of(level_preset("v1"), Precision::fp32()));
  EXPECT_EQ(op(mat, "forward/layer0/attention").bytes, (96 + 48) * 4 + 12 * 4 + 36 * 4);
  EXPECT_EQ(attention_training_flops(tiny(), kTinyShape), 864);
}

// The embedding's cost at the tiny config, its gradient by `grad`.
OpCost embedding_cost(int vocab, const char* path, EmbeddingGradImpl grad) {
  ModelConfig cfg = tiny();
  cfg.vocab_size = vocab;
  StepPlan plan = graph_plan(level_preset("v1"), Precision::fp32(), cfg, kTinyShape);
  plan.ops.embedding_grad = grad;
  return op(step_cost(cfg, kTinyShape, plan), path);
}

// Each touched table row moves once, forward and backward: the rows 6
// uniform ids over 10 touch in expectation, 10 (1 - 0.9^6) = 4.69 -> 5; over
// a vocabulary of 2, 2 (1 - 0.5^6) = 1.97 -> 2 (the whole table, not 6 rows).
TEST(CostModel, TheEmbeddingMovesEachTouchedRowOnce) {
  const auto cost = [](int vocab, const char* path) {
    return embedding_cost(vocab, path, EmbeddingGradImpl::Scan);
  };
  const auto bytes = [&](int vocab, const char* path) { return cost(vocab, path).bytes; };
  // ids 6 x 4; rows read 5 x 8 x 4; out written 6 x 8 x 4.
  EXPECT_EQ(bytes(10, "forward/embedding"), 24 + 5 * 32 + 6 * 32);
  // ids; dout read 6 x 8 x 4; 5 gradient rows read and written.
  EXPECT_EQ(bytes(10, "backward/embedding"), 24 + 6 * 32 + 2 * 5 * 32);
  EXPECT_EQ(bytes(2, "forward/embedding"), 24 + 2 * 32 + 6 * 32);
  EXPECT_EQ(bytes(2, "backward/embedding"), 24 + 6 * 32 + 2 * 2 * 32);
  // Written: out; the touched gradient rows.
  EXPECT_EQ(cost(10, "forward/embedding").write_bytes, 6 * 32);
  EXPECT_EQ(cost(10, "backward/embedding").write_bytes, 5 * 32);
}

// The sorted gradient's runs that cross chunks leave partial rows, written
// and read back: 2 x boundaries x the share of equal neighbours. At the
// workshop's B32 S1024 over a 1 000-row vocabulary, 32 768 positions in
// 1 024 chunks of 32 touch 1 000 rows: 2 x 1 023 x 31 768 / 32 767 = 1 983.6
// rows, nearly two a chunk.
TEST(CostModel, TheSortedEmbeddingGradientCountsItsPartialRows) {
  EXPECT_EQ(embedding_chunk_rows(32768), 32);
  EXPECT_NEAR(embedding_partial_rows(32768, 1000), 2.0 * 1023 * 31768 / 32767, 1e-9);
  EXPECT_EQ(embedding_partial_rows(1, 1), 0.0);
  EXPECT_EQ(embedding_partial_rows(4096, 4096), 0.0) << "no id twice: no run crosses a chunk";
  // The tiny config: 6 positions in chunks of 4 (one boundary), 5 rows.
  EXPECT_EQ(embedding_chunk_rows(6), 4);
  const OpCost scan = embedding_cost(10, "backward/embedding", EmbeddingGradImpl::Scan);
  const OpCost sorted = embedding_cost(10, "backward/embedding", EmbeddingGradImpl::Sorted);
  const auto partial = static_cast<std::int64_t>(std::llround(2.0 * 1 * (6 - 5) / 5.0 * 8 * 4));
  EXPECT_EQ(sorted.write_bytes - scan.write_bytes, partial);
  EXPECT_EQ(sorted.read_bytes() - scan.read_bytes(), partial);
}

TEST(CostModel, OptimizerAndPrecisionDependentOps) {
  const StepCost fp32 =
      step_cost(tiny(), kTinyShape, plan_of(level_preset("v1"), Precision::fp32()));
  // 584 parameters: embedding 80, layer 496 (norms 16, Wqkv 128, Wo 64,
  // Wgu 192, Wdown 96), final norm 8; AdamW reads 4 and writes 3 fp32 tensors.
  EXPECT_EQ(op(fp32, "optimizer/adamw").bytes, 7 * 584 * 4);
  EXPECT_EQ(op(fp32, "optimizer/adamw").write_bytes, 3 * 584 * 4);
  EXPECT_EQ(op(fp32, "optimizer/adamw").kind, OpKind::Optimizer);
  EXPECT_EQ(fp32.find("optimizer/refresh_weights"), nullptr);
  EXPECT_EQ(fp32.find("backward/overflow_check"), nullptr);

  const StepCost bf16 =
      step_cost(tiny(), kTinyShape, plan_of(level_preset("v2"), Precision::amp(DType::BF16)));
  // bf16 activations and weight copy, fp32 weight gradient.
  EXPECT_EQ(op(bf16, "backward/layer0/qkv_gemm_wgrad").bytes, (96 + 48) * 2 + 128 * 4);
  // v2's fused optimizer writes the compute copy itself: no refresh op, and
  // its sweeps cover the whole flat block, padding included: the layer's
  // during the backward pass, the embedding and final norm after it.
  EXPECT_EQ(bf16.find("optimizer/refresh_weights"), nullptr);
  const ParamLayout layout(tiny());
  const std::int64_t total = layout.total();
  const std::int64_t layer = layout.layer_span(0).size();
  EXPECT_EQ(op(bf16, "backward/layer0/adamw").bytes, 7 * layer * 4 + layer * 2);
  EXPECT_EQ(op(bf16, "backward/layer0/adamw").write_bytes, 3 * layer * 4 + layer * 2);
  // A sweep's nominal FLOPs are per element it passes, padding included;
  // the per-tensor updates pass the 584 parameters only.
  EXPECT_EQ(op(bf16, "backward/layer0/adamw").flops, 12 * layer);
  EXPECT_EQ(op(bf16, "backward/layer0/adamw").kind, OpKind::Optimizer);
  EXPECT_EQ(op(bf16, "optimizer/adamw").bytes, 7 * (total - layer) * 4 + (total - layer) * 2);
  EXPECT_EQ(op(bf16, "optimizer/adamw").flops + op(bf16, "backward/layer0/adamw").flops,
            12 * total);
  EXPECT_EQ(op(fp32, "optimizer/adamw").flops, 12 * 584);
  // Without graphs, or under fp16, one sweep after the backward pass.
  OpChoices no_graphs = level_preset("v2");
  no_graphs.execution = Execution::Eager;
  const StepCost one_sweep =
      step_cost(tiny(), kTinyShape, plan_of(no_graphs, Precision::amp(DType::BF16)));
  EXPECT_EQ(one_sweep.find("backward/layer0/adamw"), nullptr);
  EXPECT_EQ(op(one_sweep, "optimizer/adamw").bytes, 7 * total * 4 + total * 2);
  OpChoices per_tensor = level_preset("v2");
  per_tensor.optimizer = OptimizerImpl::PerTensor;
  const StepCost bf16_per_tensor =
      step_cost(tiny(), kTinyShape, plan_of(per_tensor, Precision::amp(DType::BF16)));
  EXPECT_NE(bf16_per_tensor.find("optimizer/refresh_weights"), nullptr);
  EXPECT_EQ(op(bf16_per_tensor, "optimizer/adamw").bytes, 7 * 584 * 4);
  EXPECT_EQ(bf16.find("backward/overflow_check"), nullptr);
  const StepCost fp16 =
      step_cost(tiny(), kTinyShape, plan_of(level_preset("v2"), Precision::amp(DType::F16)));
  EXPECT_NE(fp16.find("backward/overflow_check"), nullptr);
  EXPECT_EQ(fp16.find("backward/layer0/adamw"), nullptr);
}

// The chunked loss's kernel reads a chunk's logits from DRAM once and
// writes them once where a Hopper block can hold a row (staged in shared
// memory, or streamed twice with the second pass hitting L2); longer rows
// are counted read twice (ops/loss/cross_entropy_rows.h).
TEST(CostModel, ChunkedLossReadsRowsOnceWhereABlockHoldsThem) {
  auto logit_bytes = [](std::int64_t vocab, Precision precision) {
    ModelConfig cfg = tiny();
    cfg.vocab_size = vocab;
    const StepPlan plan = graph_plan(level_preset("v3"), precision, cfg, kTinyShape);
    EXPECT_EQ(plan.ops.loss, LossImpl::Chunked);
    const std::int64_t t = kTinyShape.tokens();
    // Less the targets (4 bytes a row) and the losses (fp32).
    return op(step_cost(cfg, kTinyShape, plan), "forward/cross_entropy").bytes - t * 4 - t * 4;
  };
  const Precision bf16 = Precision::amp(DType::BF16);
  EXPECT_EQ(logit_bytes(10, bf16), 2 * 6 * 10 * 2) << "20-byte rows: streamed, L2 holds them";
  EXPECT_EQ(logit_bytes(12287, bf16), 2 * 6 * 12287 * 2) << "just under 24 KiB: streamed";
  EXPECT_EQ(logit_bytes(12288, bf16), 2 * 6 * 12288 * 2) << "24 KiB: staged";
  EXPECT_EQ(logit_bytes(50257, bf16), 2 * 6 * 50257 * 2) << "GPT-2's 100 KB rows: staged";
  EXPECT_EQ(logit_bytes(50257, Precision::fp32()), 2 * 6 * 50257 * 4) << "201 KB: staged";
  EXPECT_EQ(logit_bytes(60000, Precision::fp32()), 3 * 6 * 60000 * 4)
      << "240 KB: more than a Hopper block's shared memory";
  // Written: the gradient over the logits, in place, and the losses.
  const StepPlan plan = graph_plan(level_preset("v3"), Precision::fp32(), tiny(), kTinyShape);
  EXPECT_EQ(op(step_cost(tiny(), kTinyShape, plan), "forward/cross_entropy").write_bytes,
            6 * 10 * 4 + 6 * 4);
}

// RMSNorm's backward writes its weight gradient as partial rows (at most
// kRmsnormPartialRows, no more than the rows) and reads them back to sum
// them: fp32, on top of its operands (measured on an H200 at the 1 B
// shapes: the backward norms read and wrote 10.6 % over the operands alone).
TEST(CostModel, NormBackwardCountsItsPartialRows) {
  EXPECT_EQ(rmsnorm_partial_sum_bytes(6, 8), 2 * 6 * 8 * 4);
  EXPECT_EQ(rmsnorm_partial_sum_bytes(8192, 2048), 2 * 1056 * 2048 * 4);
  const StepCost fp32 =
      step_cost(tiny(), kTinyShape, plan_of(level_preset("v1"), Precision::fp32()));
  // T = 6 rows of D = 8 floats: dout, x read and dx written (3 x 192), the
  // weight read and its gradient written (2 x 32), rstd read (24), and the
  // 6 partial rows written and read (2 x 192).
  EXPECT_EQ(op(fp32, "backward/final_norm").bytes, 3 * 192 + 2 * 32 + 24 + 2 * 192);
  EXPECT_EQ(op(fp32, "backward/final_norm").write_bytes, 192 + 32 + 192);
}

TEST(CostModel, WholeStepIsSixNTPlusTheAttentionTerm) {
  // N: every parameter in a matrix product (not the RMSNorm weights), the
  // tied embedding once: 80 + 128 + 64 + 3*12*8 = 560.
  EXPECT_EQ(matmul_parameters(tiny()), 560);
  const StepCost tiny_cost =
      step_cost(tiny(), kTinyShape, plan_of(level_preset("v1"), Precision::fp32()));
  EXPECT_EQ(tiny_cost.model_flops(), 6 * 560 * 6 + 864);

  ModelConfig big;  // the DESIGN default model
  const BatchShape shape{8, 128};
  for (const PlanVariant& v : level_variants()) {
    for (const Precision& p : {Precision::fp32(), Precision::amp(DType::BF16)}) {
      const StepCost c = step_cost(big, shape, plan_of(v.ops, p));
      EXPECT_EQ(c.model_flops(),
                6 * matmul_parameters(big) * shape.tokens() + attention_training_flops(big, shape))
          << v.name;
      EXPECT_EQ(c.attention_flops(), attention_training_flops(big, shape));
      EXPECT_EQ(c.tokens, shape.tokens());
    }
  }
  // 6*L*B*H*S^2*hd for the default model at B8 S128.
  EXPECT_EQ(attention_training_flops(big, shape), 6LL * 8 * 8 * 8 * 128 * 128 * 64);
}

TEST(CostModel, KindKeysSumLayers) {
  const StepCost c = step_cost(tiny(), kTinyShape, plan_of(level_preset("v2"), Precision::fp32()));
  EXPECT_EQ(op(c, "forward/layer0/qkv_gemm").kind_key(), "forward/qkv_gemm");
  EXPECT_EQ(op(c, "forward/layer0/qkv_gemm").layer, 0);
  EXPECT_EQ(op(c, "optimizer/adamw").kind_key(), "optimizer/adamw");
  EXPECT_EQ(op(c, "optimizer/adamw").layer, -1);
}

// ---- the join: marked ops == modelled ops --------------------------------------

std::set<std::string> marked_leaf_ops(const StepPlan& plan) {
  ModelConfig cfg = tiny();
  cfg.num_layers = 2;
  const BatchShape shape{2, 4};
  CpuBackend backend;
  Model model(cfg, shape, plan, backend);
  model.set_params(initial_weights(model.layout(), 3));
  std::vector<std::int32_t> rows(static_cast<std::size_t>(shape.batch * (shape.seq + 1)), 1);
  model.set_batch(rows);

  // A whole step as the trainer runs it (StepRunner): v2 updates each
  // layer during the backward pass.
  model.stage_step(1.0f, false, AdamWHyper{});
  HostRangeRecorder recorder;
  set_op_observer(&recorder);
  model.forward_pass();
  model.backward_pass(/*update_layers=*/true);
  model.optimizer_pass();
  set_op_observer(nullptr);

  const auto& ranges = recorder.ranges();
  std::vector<bool> has_child(ranges.size(), false);
  for (const HostRange& r : ranges) {
    if (r.parent >= 0) has_child[static_cast<std::size_t>(r.parent)] = true;
  }
  std::set<std::string> leaves;
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_GE(ranges[i].end_ns, ranges[i].start_ns) << recorder.path(static_cast<int>(i));
    if (!has_child[i]) leaves.insert(recorder.path(static_cast<int>(i)));
  }
  return leaves;
}

TEST(CostModel, EveryMarkedOpIsModelledAndEveryModelledOpIsMarked) {
  // Each level and each single change of it, the per-layer sweeps included
  // (the model runs a Graph plan's passes on the CPU in order).
  for (const PlanVariant& v : level_variants()) {
    for (const Precision& p : {Precision::fp32(), Precision::fp64()}) {
      ModelConfig cfg = tiny();
      cfg.num_layers = 2;
      const StepPlan plan = graph_plan(v.ops, p, cfg, BatchShape{2, 4});
      const StepCost c = step_cost(cfg, BatchShape{2, 4}, plan);
      std::set<std::string> modelled;
      for (const OpCost& o : c.ops) modelled.insert(o.path);
      EXPECT_EQ(marked_leaf_ops(plan), modelled) << v.name;
    }
  }
}

}  // namespace
}  // namespace tinyllama::prof
