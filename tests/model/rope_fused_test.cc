// RopeImpl::Fused: RoPE's backward rotation inside attention's backward.
// The plan keeps it only with our flash attention (decided after auto is
// resolved) and says why otherwise; on the CPU it is the composition, so a
// run with it trains to the same bits as the separate pass; the cost model,
// the op names and the memory trace lose the backward "rope" op and keep the
// forward one; --rope parses both names and refuses others.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/errors.h"
#include "model/model.h"
#include "model/test_plans.h"
#include "prof/cost_model.h"
#include "prof/memory_timeline.h"
#include "train/level_select.h"
#include "trained_steps.h"

namespace tinyllama {
namespace {

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 29;
  c.hidden_dim = 16;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.ffn_dim = 24;
  return c;
}

constexpr BatchShape kShape{2, 6};

OpChoices with_rope(const std::string& level, RopeImpl rope) {
  OpChoices ops = level_preset(level);
  ops.rope = rope;
  return ops;
}

// A CUDA-like device with cuDNN, where attention=auto timed cuDNN faster.
DeviceCaps cudnn_capable_caps() {
  DeviceCaps caps = graph_capable_cpu_caps();
  caps.kind = DeviceKind::Cuda;
  caps.flash_head_dims = {32, 64, 128};
  caps.cudnn_attention = "";
  caps.times_attention = true;
  caps.cudnn_timing = AttentionTiming{1.0, 2.0};
  caps.flash_timing = AttentionTiming{3.0, 4.0};
  return caps;
}

// head_dim 32: one the CUDA flash kernels are built for.
ModelConfig flash_config() {
  ModelConfig c = small_config();
  c.hidden_dim = 128;
  return c;
}

StepPlan plan_on(const DeviceCaps& caps, OpChoices ops) {
  return plan_for_choices(ops, Precision::amp(DType::BF16), caps, flash_config(), kShape);
}

TEST(RopeFused, KeptWithFlashAttention) {
  for (const char* level : {"v2", "v3"}) {
    const StepPlan cpu =
        graph_plan(with_rope(level, RopeImpl::Fused), Precision::fp32(), small_config(), kShape);
    EXPECT_EQ(cpu.ops.rope, RopeImpl::Fused) << level;
    EXPECT_TRUE(cpu.fallbacks.empty()) << level;
    const StepPlan cuda = plan_on(cudnn_capable_caps(), with_rope(level, RopeImpl::Fused));
    EXPECT_EQ(cuda.ops.rope, RopeImpl::Fused) << level;
    EXPECT_NE(cuda.describe().find("rope fused"), std::string::npos) << cuda.describe();
  }
}

TEST(RopeFused, FallsBackToSeparateWithoutFlash) {
  struct Case {
    AttentionImpl attention;
    const char* names;  // the attention the reason must name
  };
  for (const Case c : {Case{AttentionImpl::Materialized, "attention materialized"},
                       Case{AttentionImpl::Cudnn, "attention cudnn"},
                       // auto resolves to cuDNN here (it times faster): the
                       // rope choice is taken after that.
                       Case{AttentionImpl::Auto, "attention cudnn"}}) {
    OpChoices ops = with_rope("v3", RopeImpl::Fused);
    ops.attention = c.attention;
    const StepPlan plan = plan_on(cudnn_capable_caps(), ops);
    SCOPED_TRACE(impl_name(c.attention));
    EXPECT_EQ(plan.ops.rope, RopeImpl::Separate);
    ASSERT_EQ(plan.fallbacks.size(), 1u);
    const Fallback& f = plan.fallbacks[0];
    EXPECT_EQ(f.op, "rope");
    EXPECT_EQ(f.wanted, "fused");
    EXPECT_EQ(f.using_, "separate");
    EXPECT_NE(f.reason.find("flash attention backward only"), std::string::npos) << f.reason;
    EXPECT_NE(f.reason.find(c.names), std::string::npos) << f.reason;
  }
  // A flash request that falls back to materialised (head_dim 96) takes
  // rope with it: two fallbacks, attention's first.
  ModelConfig wide = small_config();
  wide.hidden_dim = 4 * 96;
  const StepPlan plan = plan_for_choices(with_rope("v3", RopeImpl::Fused), Precision::fp32(),
                                         cudnn_capable_caps(), wide, kShape);
  ASSERT_EQ(plan.fallbacks.size(), 2u);
  EXPECT_EQ(plan.fallbacks[0].op, "attention");
  EXPECT_EQ(plan.fallbacks[1].op, "rope");
  EXPECT_EQ(plan.ops.rope, RopeImpl::Separate);
}

TEST(RopeFused, AutoThatKeepsFlashKeepsIt) {
  DeviceCaps caps = cudnn_capable_caps();
  caps.flash_timing = AttentionTiming{1.0, 2.0};
  caps.cudnn_timing = AttentionTiming{3.0, 4.0};
  OpChoices ops = with_rope("v3", RopeImpl::Fused);
  ops.attention = AttentionImpl::Auto;
  const StepPlan plan = plan_on(caps, ops);
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Flash);
  EXPECT_EQ(plan.ops.rope, RopeImpl::Fused);
  EXPECT_TRUE(plan.fallbacks.empty());
}

// cuDNN's forward with our backward keeps the backward's rotation.
TEST(RopeFused, KeptWhereOurBackwardRunsAfterCudnnsForward) {
  OpChoices ops = with_rope("v3", RopeImpl::Fused);
  ops.attention = AttentionImpl::CudnnFlash;
  const StepPlan plan = plan_on(cudnn_capable_caps(), ops);
  EXPECT_EQ(plan.ops.attention, AttentionImpl::CudnnFlash);
  EXPECT_EQ(plan.ops.rope, RopeImpl::Fused);
  EXPECT_TRUE(plan.fallbacks.empty());
}

TrainedSteps train_steps(const OpChoices& ops, Precision precision) {
  const ModelConfig cfg = small_config();
  const StepPlan plan = graph_plan(ops, precision, cfg, kShape);
  EXPECT_EQ(plan.ops.rope, ops.rope) << "the CPU runs both";
  return train_cpu_steps(cfg, kShape, plan, 2, 5, 40);
}

// The CPU's fused op is attention's backward then rope's: the same calls
// in the same order, so the same bits.
TEST(RopeFused, TrainsToTheSameBitsAsSeparateOnTheCpu) {
  for (const char* level : {"v2", "v3"}) {
    for (const Precision p : {Precision::fp32(), Precision::fp64()}) {
      const TrainedSteps a = train_steps(with_rope(level, RopeImpl::Separate), p);
      const TrainedSteps b = train_steps(with_rope(level, RopeImpl::Fused), p);
      const std::string what = std::string(level) + " " + precision_name(p);
      ASSERT_FALSE(a.grads.empty());
      EXPECT_NE(a.grads[0], 0.0) << "gradients of a trained step, not zeros";
      EXPECT_EQ(a.losses, b.losses) << what;
      EXPECT_EQ(a.grads, b.grads) << what;
      EXPECT_EQ(a.params, b.params) << what;
    }
  }
}

TEST(RopeFused, CostModelMovesTheBackwardRotationIntoAttention) {
  const ModelConfig cfg = small_config();
  const Precision p = Precision::amp(DType::BF16);
  const prof::StepCost sep =
      prof::step_cost(cfg, kShape, graph_plan(with_rope("v3", RopeImpl::Separate), p, cfg, kShape));
  const prof::StepCost fused =
      prof::step_cost(cfg, kShape, graph_plan(with_rope("v3", RopeImpl::Fused), p, cfg, kShape));
  for (int l = 0; l < cfg.num_layers; ++l) {
    const std::string layer = "layer" + std::to_string(l) + "/";
    EXPECT_NE(fused.find("forward/" + layer + "rope"), nullptr) << "the forward stays separate";
    EXPECT_NE(sep.find("backward/" + layer + "rope"), nullptr);
    EXPECT_EQ(fused.find("backward/" + layer + "rope"), nullptr);
    const prof::OpCost* a = sep.find("backward/" + layer + "attention");
    const prof::OpCost* b = fused.find("backward/" + layer + "attention");
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    const prof::OpCost* rope = sep.find("backward/" + layer + "rope");
    ASSERT_NE(rope, nullptr);
    // Attention's flops stay its products (model work); its bytes gain
    // the (cos, sin) table, seq x head_dim/2 pairs of two floats, while
    // the rope op's pass over dq|dk is gone.
    EXPECT_EQ(b->flops, a->flops);
    EXPECT_EQ(b->bytes, a->bytes + kShape.seq * cfg.head_dim() / 2 * 8);
    EXPECT_GT(rope->bytes, kShape.seq * cfg.head_dim() / 2 * 8);
  }
  EXPECT_EQ(fused.model_flops(), sep.model_flops());
  EXPECT_LT(fused.total_bytes(), sep.total_bytes());
}

TEST(RopeFused, TheMemoryTraceHasNoBackwardRopeOp) {
  const ModelConfig cfg = small_config();
  auto op_names = [&](RopeImpl rope) {
    const StepPlan plan = graph_plan(with_rope("v3", rope), Precision::fp32(), cfg, kShape);
    std::vector<std::string> names;
    for (const prof::TimelineOp& op : prof::trace_memory_timeline(cfg, kShape, plan).ops) {
      names.push_back(op.name);
    }
    return names;
  };
  auto count = [](const std::vector<std::string>& names, const std::string& what) {
    int n = 0;
    for (const std::string& s : names) n += s == what ? 1 : 0;
    return n;
  };
  const std::vector<std::string> sep = op_names(RopeImpl::Separate);
  const std::vector<std::string> fused = op_names(RopeImpl::Fused);
  EXPECT_EQ(count(sep, "backward/layer1/rope"), 1);
  EXPECT_EQ(count(fused, "backward/layer1/rope"), 0);
  EXPECT_EQ(count(fused, "forward/layer1/rope"), 1);
  EXPECT_EQ(count(fused, "backward/layer1/attention"), 1);
  EXPECT_EQ(sep.size(), fused.size() + static_cast<std::size_t>(cfg.num_layers));
}

TEST(RopeFused, FlagNamesBothChoices) {
  EXPECT_EQ(parse_rope("fused"), RopeImpl::Fused);
  EXPECT_EQ(parse_rope("separate"), RopeImpl::Separate);
  ToggleFlags flags;
  flags.rope = "fused";
  EXPECT_EQ(apply_toggle_flags(level_preset("v3"), flags).rope, RopeImpl::Fused);
  try {
    parse_rope("inline");
    ADD_FAILURE() << "--rope inline was accepted";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--rope inline: allowed values are separate, fused");
  }
}

}  // namespace
}  // namespace tinyllama
