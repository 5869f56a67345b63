// ActivationPlan: the buffers a plan needs, and only those, in one arena.
#include "model/activation_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <set>
#include <string>

#include "arena_cover.h"
#include "model/test_plans.h"

namespace tinyllama {
namespace {

ModelConfig small_config() {
  ModelConfig cfg;
  cfg.vocab_size = 37;
  cfg.hidden_dim = 24;
  cfg.num_layers = 2;
  cfg.num_heads = 3;
  cfg.num_kv_heads = 1;
  cfg.ffn_dim = 40;
  return cfg;
}

ActivationPlan plan_for(const OpChoices& ops, Precision precision) {
  const ModelConfig cfg = small_config();
  const BatchShape shape{2, 5};
  return ActivationPlan(cfg, shape, graph_plan(ops, precision, cfg, shape));
}

TEST(ActivationPlan, ScoresAndSiluBuffersOnlyWhereThePlanNeedsThem) {
  const ActivationPlan v1 = plan_for(level_preset("v1"), Precision::fp32());
  const ActivationPlan v2 = plan_for(level_preset("v2"), Precision::fp32());
  EXPECT_TRUE(v1.layers[0].probs.used());
  EXPECT_TRUE(v1.layers[0].silu_gate.used());
  EXPECT_TRUE(v1.d_silu_gate.used());
  EXPECT_FALSE(v2.layers[0].probs.used());
  EXPECT_FALSE(v2.layers[0].silu_gate.used());
  EXPECT_FALSE(v2.d_silu_gate.used());
  EXPECT_EQ(v1.layers[0].probs.rows, 2 * 3 * 5);  // [B*H*S, S]
  EXPECT_EQ(v1.layers[0].probs.cols, 5);
  EXPECT_LT(v2.bytes, v1.bytes);
}

// Separate QKV or gate-up GEMMs sum their data gradients in fp32 under AMP
// (as autograd does), so the sum is rounded once, not once per GEMM.
TEST(ActivationPlan, SeparateDataGradientsSumInFp32UnderAmpOnly) {
  const Precision bf16 = Precision::amp(DType::BF16);
  const ActivationPlan v1 = plan_for(level_preset("v1"), bf16);
  ASSERT_TRUE(v1.d_norm_sum.used());
  EXPECT_EQ(v1.d_norm_sum.dtype, DType::F32);
  EXPECT_EQ(v1.d_norm_sum.rows, 10);
  EXPECT_EQ(v1.d_norm_sum.cols, 24);
  EXPECT_FALSE(plan_for(level_preset("v1"), Precision::fp32()).d_norm_sum.used());
  EXPECT_FALSE(plan_for(level_preset("v2"), bf16).d_norm_sum.used());

  OpChoices only_gate_up = level_preset("v2");
  only_gate_up.gate_up_gemm = GemmGrouping::Separate;
  EXPECT_TRUE(plan_for(only_gate_up, bf16).d_norm_sum.used());
}

// The logits rows span the padded vocabulary (a multiple of 128: the
// LM-head GEMMs run over it, the loss reads the first vocab_size columns);
// every other buffer is packed.
TEST(ActivationPlan, LogitsRowsSpanThePaddedVocabulary) {
  for (const Precision p : {Precision::fp32(), Precision::amp(DType::BF16)}) {
    const ActivationPlan plan = plan_for(level_preset("v2"), p);  // vocab 37
    EXPECT_EQ(plan.logits.cols, 37);
    EXPECT_EQ(plan.logits.ld, 128);
    EXPECT_EQ(plan.d_qkv.ld, plan.d_qkv.cols);
  }
  ModelConfig gpt2;
  gpt2.vocab_size = 50257;
  EXPECT_EQ(gpt2.padded_vocab(), 50304);
  gpt2.vocab_size = 50304;
  EXPECT_EQ(gpt2.padded_vocab(), 50304);
}

TEST(ActivationPlan, SlotsAreDisjointAndInsideTheArena) {
  const ActivationPlan plan = plan_for(level_preset("v1"), Precision::amp(DType::BF16));
  std::vector<Slot> slots{plan.residual_out, plan.final_norm, plan.logits,    plan.d_norm_out,
                          plan.d_norm_in,    plan.d_qkv,      plan.d_norm_sum};
  for (const LayerActivations& a : plan.layers) {
    for (const Slot& s : {a.residual_in, a.qkv, a.probs, a.gate_up, a.ffn_hidden}) {
      slots.push_back(s);
    }
  }
  auto end = [](const Slot& s) {
    return s.offset + s.rows * s.ld * static_cast<std::int64_t>(dtype_size(s.dtype));
  };
  // The block output, the final norm's and the logits (indices 0 to 2) may
  // share bytes with the scratch laid over them.
  const std::vector<bool> over_logits{false, false, false, false, true, true, true};
  for (std::size_t i = 0; i < slots.size(); ++i) {
    ASSERT_TRUE(slots[i].used());
    EXPECT_LE(end(slots[i]), plan.bytes);
    for (std::size_t j = i + 1; j < slots.size(); ++j) {
      const bool apart = end(slots[i]) <= slots[j].offset || end(slots[j]) <= slots[i].offset;
      const bool may_share = i <= 2 && j < over_logits.size() && over_logits[j];
      EXPECT_TRUE(apart || may_share) << "slots " << i << " and " << j << " overlap";
    }
  }
}

// The named buffers the reports break the activations down by: every used
// slot once, back to back from offset 0 (the scratch over the logits back to
// back from where the block output, the logits and the FP8 forward copies
// start: the block output's offset), so that they cover the arena, each
// with a kind the reports know.
TEST(ActivationPlan, NamedBuffersTileTheArena) {
  for (const char* level : {"v1", "v2", "v3"}) {
    for (const Precision p : {Precision::fp32(), Precision::amp(DType::BF16)}) {
      const ActivationPlan plan = plan_for(level_preset(level), p);
      const std::vector<ActivationBuffer> buffers = plan.buffers();
      std::int64_t next = 0, next_over = plan.residual_out.offset;
      std::set<std::string> names;
      for (const ActivationBuffer& b : buffers) {
        std::int64_t& expected = b.over_logits ? next_over : next;
        EXPECT_EQ(b.slot.offset, expected) << level << " " << b.name;
        EXPECT_GT(b.bytes, 0) << b.name;
        expected += b.bytes;
        EXPECT_TRUE(names.insert(b.name).second) << "repeated " << b.name;
        const bool known = std::any_of(std::begin(kActivationKinds), std::end(kActivationKinds),
                                       [&](const char* k) { return std::string(k) == b.kind; });
        EXPECT_TRUE(known) << b.name << " has kind " << b.kind;
      }
      EXPECT_EQ(std::max(next, next_over), plan.bytes) << level;
      EXPECT_EQ(covered_bytes(buffers), plan.bytes) << level;
      EXPECT_EQ(names.count("layer1.qkv"), 1u);
      EXPECT_EQ(names.count("layer0.probs"), std::string(level) == "v1" ? 1u : 0u) << level;
    }
  }
}

}  // namespace
}  // namespace tinyllama
