// ActivationsImpl::RecomputeNorms: the backward pass remakes each layer's
// normalised inputs from the saved input and rstd instead of keeping them,
// and that must change nothing but the memory: the same losses, gradients,
// moments and weights to the bit, at every level, step after step; the op
// itself gives rmsnorm_forward's output to the bit; the arena is smaller by
// the per-layer copies. RecomputeNormsSwiglu ("recompute") the same, with the
// SwiGLU output remade too, under either SwiGLU implementation.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "arena_cover.h"
#include "core/rng.h"
#include "model/model.h"
#include "model/test_plans.h"
#include "ops/norm/cpu_rmsnorm.h"
#include "trained_steps.h"

namespace tinyllama {
namespace {

TrainedSteps train_steps(const OpChoices& ops, Precision precision) {
  const ModelConfig cfg = small_trained_config();
  const BatchShape shape{2, 6};
  return train_cpu_steps(cfg, shape, graph_plan(ops, precision, cfg, shape), 3, 21, 100);
}

// Each level, and v3 with the unfused SwiGLU (silu then mul through a kept
// silu(g), which v1 has with unfused GEMMs), against itself with stored
// activations.
std::vector<PlanVariant> stored_variants() {
  std::vector<PlanVariant> out;
  for (const char* level : {"v1", "v2", "v3"}) out.push_back({level, level_preset(level)});
  OpChoices unfused_swiglu = level_preset("v3");
  unfused_swiglu.swiglu = SwigluImpl::Separate;
  out.push_back({"v3 swiglu=separate", unfused_swiglu});
  for (PlanVariant& v : out) v.ops.activations = ActivationsImpl::Stored;
  return out;
}

void expect_same_bits_as_stored(ActivationsImpl recomputed) {
  for (const PlanVariant& v : stored_variants()) {
    for (const Precision p : {Precision::fp32(), Precision::fp64()}) {
      OpChoices recompute = v.ops;
      recompute.activations = recomputed;
      const TrainedSteps a = train_steps(v.ops, p);
      const TrainedSteps b = train_steps(recompute, p);
      const std::string what = v.name + " " + precision_name(p);
      ASSERT_EQ(a.losses.size(), 3u);
      expect_same_bits(a, b, what);
    }
  }
}

TEST(RecomputeNorms, TrainsToTheSameBitsAsStoredNorms) {
  expect_same_bits_as_stored(ActivationsImpl::RecomputeNorms);
}

TEST(RecomputeSwiglu, TrainsToTheSameBitsAsStoredActivations) {
  expect_same_bits_as_stored(ActivationsImpl::RecomputeNormsSwiglu);
}

TEST(RecomputeNorms, ApplyGivesTheForwardOutputToTheBit) {
  Rng rng(3);
  for (const DType t : {DType::F32, DType::F64}) {
    const std::int64_t rows = 5, d = 37;
    const std::size_t es = dtype_size(t);
    std::vector<unsigned char> x(rows * d * es), w(d * es), y(rows * d * es), again(rows * d * es),
        rstd(rows * es);
    auto fill = [&](std::vector<unsigned char>& buf, double scale, double offset) {
      for (std::size_t i = 0; i < buf.size() / es; ++i) {
        const double v = offset + scale * (rng.uniform() * 2 - 1);
        if (t == DType::F32) {
          reinterpret_cast<float*>(buf.data())[i] = static_cast<float>(v);
        } else {
          reinterpret_cast<double*>(buf.data())[i] = v;
        }
      }
    };
    fill(x, 3.0, 0.7);
    fill(w, 0.5, 1.0);
    const Mat xm(x.data(), t, rows, d), wm(w.data(), t, 1, d), ym(y.data(), t, rows, d),
        am(again.data(), t, rows, d), rm(rstd.data(), t, rows, 1);
    cpu::rmsnorm_forward(ym, rm, xm, wm, 1e-6);
    cpu::rmsnorm_apply(am, xm, wm, rm);
    EXPECT_EQ(y, again) << dtype_name(t);
  }
}

TEST(RecomputeNorms, TheArenaKeepsOneNormOfEachKind) {
  const ModelConfig cfg = small_trained_config();
  const BatchShape shape{2, 6};
  OpChoices ops = level_preset("v2");
  const ActivationPlan stored(cfg, shape, graph_plan(ops, Precision::fp32(), cfg, shape));
  ops.activations = ActivationsImpl::RecomputeNorms;
  const ActivationPlan shared(cfg, shape, graph_plan(ops, Precision::fp32(), cfg, shape));
  // [tokens, D] fp32 rows, 256-byte aligned: 12 x 16 x 4 = 768 bytes each.
  const std::int64_t norm_bytes = 768;
  EXPECT_EQ(stored.bytes - shared.bytes, 2 * (cfg.num_layers - 1) * norm_bytes);
  EXPECT_EQ(shared.layers[0].norm1.offset, shared.layers[2].norm1.offset);
  EXPECT_NE(shared.layers[0].norm1.offset, shared.layers[0].norm2.offset);
  EXPECT_EQ(covered_bytes(shared.buffers()), shared.bytes);
}

// The SwiGLU output too is one slot for all layers: [tokens, F] per layer
// less than recompute_norms, both norms' copies less than stored.
TEST(RecomputeSwiglu, TheArenaKeepsOneSwigluOutput) {
  const ModelConfig cfg = small_trained_config();
  const BatchShape shape{2, 6};
  for (const char* level : {"v1", "v2", "v3"}) {
    OpChoices ops = level_preset(level);
    const ActivationPlan stored(cfg, shape, graph_plan(ops, Precision::fp32(), cfg, shape));
    ops.activations = ActivationsImpl::RecomputeNorms;
    const ActivationPlan norms(cfg, shape, graph_plan(ops, Precision::fp32(), cfg, shape));
    ops.activations = ActivationsImpl::RecomputeNormsSwiglu;
    const ActivationPlan all(cfg, shape, graph_plan(ops, Precision::fp32(), cfg, shape));
    // 12 tokens in fp32, 256-byte aligned: a norm [12, 16] is 768 bytes, the
    // SwiGLU output [12, 24] 1152, rounded up to 1280.
    const std::int64_t norm_bytes = 768, hidden_bytes = 1280;
    EXPECT_EQ(norms.bytes - all.bytes, (cfg.num_layers - 1) * hidden_bytes) << level;
    EXPECT_EQ(stored.bytes - all.bytes, (cfg.num_layers - 1) * (2 * norm_bytes + hidden_bytes))
        << level;
    EXPECT_TRUE(all.hidden_shared && all.norms_shared);
    EXPECT_FALSE(norms.hidden_shared);
    EXPECT_EQ(all.layers[0].ffn_hidden.offset, all.layers[2].ffn_hidden.offset);
    EXPECT_NE(all.layers[0].ffn_hidden.offset, all.layers[0].gate_up.offset);
    // The shared slot is listed once, by its own name, and the buffers still
    // tile the arena.
    int hidden_buffers = 0;
    for (const ActivationBuffer& b : all.buffers()) {
      // "ffn_hidden" or "layerN.ffn_hidden", not the gradient "d_ffn_hidden".
      const bool saved_hidden =
          b.name == "ffn_hidden" || b.name.find(".ffn_hidden") != std::string::npos;
      if (saved_hidden) {
        ++hidden_buffers;
        EXPECT_EQ(b.name, "ffn_hidden");
        EXPECT_STREQ(b.kind, "ffn_intermediates");
        EXPECT_EQ(b.bytes, hidden_bytes);
      }
    }
    EXPECT_EQ(hidden_buffers, 1) << level;
    EXPECT_EQ(covered_bytes(all.buffers()), all.bytes) << level;
  }
}

// Issue 16's 1 B config (D2048 L16 H32 K16 V32000, B8 S1024, bf16): the
// memory check's activations (Model::estimate_memory, the run's arena) drop
// by 15 of the 16 SwiGLU outputs against recompute_norms, each [8192, 8192]
// bf16, and by those and 15 x 2 norms of [8192, 2048] against stored.
TEST(RecomputeSwiglu, TheBillionParameterConfigKeepsOneSwigluOutput) {
  ModelConfig cfg;
  cfg.vocab_size = 32000;
  cfg.hidden_dim = 2048;
  cfg.num_layers = 16;
  cfg.num_heads = 32;
  cfg.num_kv_heads = 16;
  cfg.ffn_dim = 4 * 2048;
  const BatchShape shape{8, 1024};
  const Precision bf16 = Precision::amp(DType::BF16);
  auto activations = [&](ActivationsImpl a) {
    OpChoices ops = level_preset("v3");
    ops.activations = a;
    return Model::estimate_memory(cfg, shape, graph_plan(ops, bf16, cfg, shape)).activations;
  };
  const std::int64_t hidden_bytes = std::int64_t{8192} * 8192 * 2;
  const std::int64_t norm_bytes = std::int64_t{8192} * 2048 * 2;
  const std::int64_t all = activations(ActivationsImpl::RecomputeNormsSwiglu);
  EXPECT_EQ(activations(ActivationsImpl::RecomputeNorms) - all, 15 * hidden_bytes);
  EXPECT_EQ(activations(ActivationsImpl::Stored) - all, 15 * (hidden_bytes + 2 * norm_bytes));
}

}  // namespace
}  // namespace tinyllama
