// StepPlan::scratch_over_logits: the backward scratch that only the layers'
// backward touches lies over what is dead by then in the arena (the last
// block's output, the final norm's, the LM head's logits and the FP8
// forward copies). The
// arena is smaller by the lesser of the two, and nothing else changes: the
// same losses, gradients and weights to the bit, at every level, with the
// loss in one pass or in chunks, and with emulated FP8 GEMMs; a traced step
// never has a buffer under the scratch and the scratch live at one op.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fp8_test_config.h"
#include "model/activation_plan.h"
#include "model/fp8_plan.h"
#include "model/test_plans.h"
#include "prof/memory_timeline.h"
#include "trained_steps.h"

namespace tinyllama {
namespace {

constexpr BatchShape kShape{2, 6};

StepPlan plan_with(const OpChoices& ops, Precision precision, bool over_logits,
                   std::int64_t chunk_rows = 0) {
  StepPlan plan = graph_plan(ops, precision, small_trained_config(), kShape);
  plan.scratch_over_logits = over_logits;
  if (chunk_rows > 0) plan.loss_chunk_rows = chunk_rows;
  return plan;
}

// Each level with its own loss, and v3 with the loss in chunks of 5 rows
// (three chunks of the 12 tokens: the head's last weight gradient is the
// third chunk's).
struct Variant {
  std::string name;
  OpChoices ops;
  std::int64_t chunk_rows = 0;
};

std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (const char* level : {"v1", "v2", "v3", "v4"}) out.push_back({level, level_preset(level)});
  OpChoices chunked = level_preset("v3");
  chunked.loss = LossImpl::Chunked;
  out.push_back({"v3 loss=chunked, 5 rows", chunked, 5});
  return out;
}

// Every linear GEMM in FP8, emulated in float64 on the CPU, at a model whose
// linear dimensions and token count are multiples of 16.
constexpr BatchShape kFp8Shape{2, 16};

StepPlan fp8_plan(const OpChoices& ops, bool over_logits) {
  const ModelConfig cfg = fp8_test_config();
  StepPlan plan = graph_plan(ops, Precision::fp64(), cfg, kFp8Shape);
  plan.fp8 = choose_fp8_linears(cfg, kFp8Shape, Fp8Choice::All);
  if (plan.ops.swiglu == SwigluImpl::Gemm) plan.ops.swiglu = SwigluImpl::Fused;
  plan.scratch_over_logits = over_logits;
  return plan;
}

// What lies under the scratch: dead once the last layer's backward joins
// the head's weight gradient.
bool under_scratch(const std::string& name) {
  return name == "residual_out" || name == "final_norm" || name == "logits" || name == "fp8.x" ||
         name == "fp8.w";
}

// The bytes under the scratch and the scratch's.
std::pair<std::int64_t, std::int64_t> region_bytes(const ActivationPlan& acts) {
  std::int64_t under = 0, scratch = 0;
  for (const ActivationBuffer& b : acts.buffers()) {
    if (b.over_logits) scratch += b.bytes;
    if (under_scratch(b.name)) under += b.bytes;
  }
  return {under, scratch};
}

void expect_smaller_by_the_lesser(const ActivationPlan& apart, const ActivationPlan& over,
                                  const std::string& what) {
  const auto [under, scratch] = region_bytes(over);
  ASSERT_GT(scratch, 0) << what;
  EXPECT_EQ(apart.bytes - over.bytes, std::min(under, scratch)) << what;
  for (const ActivationBuffer& b : over.buffers()) {
    if (b.over_logits) {
      EXPECT_GE(b.slot.offset, over.residual_out.offset) << what << " " << b.name;
    }
  }
  for (const ActivationBuffer& b : apart.buffers()) EXPECT_FALSE(b.over_logits) << b.name;
}

TEST(ScratchOverLogits, TheArenaIsSmallerByTheLesserOfTheTwo) {
  for (const Variant& v : variants()) {
    for (const Precision p : {Precision::fp32(), Precision::amp(DType::BF16)}) {
      const ModelConfig cfg = small_trained_config();
      const ActivationPlan apart(cfg, kShape, plan_with(v.ops, p, false, v.chunk_rows));
      const ActivationPlan over(cfg, kShape, plan_with(v.ops, p, true, v.chunk_rows));
      expect_smaller_by_the_lesser(apart, over, v.name);
    }
    const ActivationPlan apart(fp8_test_config(), kFp8Shape, fp8_plan(v.ops, false));
    const ActivationPlan over(fp8_test_config(), kFp8Shape, fp8_plan(v.ops, true));
    expect_smaller_by_the_lesser(apart, over, v.name + " fp8");
    // The FP8 forward copies are among what lies under the scratch.
    const std::vector<ActivationBuffer> buffers = over.buffers();
    for (const char* name : {"fp8.x", "fp8.w"}) {
      EXPECT_TRUE(std::any_of(buffers.begin(), buffers.end(),
                              [&](const ActivationBuffer& b) { return b.name == name; }))
          << v.name << " " << name;
    }
  }
}

// Where something reads the final norm's output after the step
// (--log-logit-stats), it keeps bytes of its own, below the scratch.
TEST(ScratchOverLogits, AFinalNormReadAfterTheStepKeepsItsBytes) {
  StepPlan plan = plan_with(level_preset("v3"), Precision::amp(DType::BF16), true);
  plan.keeps_final_norm = true;
  const ActivationPlan kept(small_trained_config(), kShape, plan);
  EXPECT_FALSE(kept.final_norm_under_scratch);
  EXPECT_LT(kept.final_norm.offset, kept.residual_out.offset);
  for (const ActivationBuffer& b : kept.buffers()) {
    if (b.over_logits) {
      EXPECT_GE(b.slot.offset, kept.residual_out.offset) << b.name;
    }
  }
  plan.keeps_final_norm = false;
  const ActivationPlan under(small_trained_config(), kShape, plan);
  EXPECT_TRUE(under.final_norm_under_scratch);
  EXPECT_GT(under.final_norm.offset, under.residual_out.offset);
}

TEST(ScratchOverLogits, TrainsToTheSameBitsAsTheScratchApart) {
  for (const Variant& v : variants()) {
    for (const Precision p : {Precision::fp32(), Precision::fp64()}) {
      const ModelConfig cfg = small_trained_config();
      const TrainedSteps a =
          train_cpu_steps(cfg, kShape, plan_with(v.ops, p, false, v.chunk_rows), 3, 21, 100);
      const TrainedSteps b =
          train_cpu_steps(cfg, kShape, plan_with(v.ops, p, true, v.chunk_rows), 3, 21, 100);
      const std::string what = v.name + " " + precision_name(p);
      ASSERT_EQ(a.losses.size(), 3u);
      expect_same_bits(a, b, what);
    }
    const ModelConfig cfg = fp8_test_config();
    const TrainedSteps a = train_cpu_steps(cfg, kFp8Shape, fp8_plan(v.ops, false), 2, 21, 100);
    const TrainedSteps b = train_cpu_steps(cfg, kFp8Shape, fp8_plan(v.ops, true), 2, 21, 100);
    expect_same_bits(a, b, v.name + " fp8");
  }
}

// The traced step's accesses: what lies under the scratch is done before the
// scratch over it is first written, and the scratch is live only inside the
// layers' backward. Were a layer's backward to read the logits, or the loss
// to write the scratch, the timeline would see them live at one op.
void expect_never_live_together(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan,
                                const std::string& what) {
  const ActivationPlan acts(cfg, shape, plan);
  std::vector<std::string> over;
  for (const ActivationBuffer& b : acts.buffers()) {
    if (b.over_logits) over.push_back(b.name);
  }
  const prof::MemoryTimeline tl = prof::trace_memory_timeline(cfg, shape, plan);
  std::vector<const prof::TimelineBuffer*> under, scratch;
  for (const prof::TimelineBuffer& b : tl.buffers) {
    if (under_scratch(b.name)) under.push_back(&b);
    if (std::find(over.begin(), over.end(), b.name) != over.end()) scratch.push_back(&b);
  }
  ASSERT_GE(under.size(), 2u) << what;  // the block output and the logits at least
  ASSERT_EQ(scratch.size(), over.size()) << what;
  const auto live = [](const std::vector<const prof::TimelineBuffer*>& bs, int op) {
    return std::any_of(bs.begin(), bs.end(), [&](const auto* b) { return b->live_at(op); });
  };
  int under_ops = 0, scratch_ops = 0;
  for (int op = 0; op < static_cast<int>(tl.ops.size()); ++op) {
    const bool any_under = live(under, op), any_scratch = live(scratch, op);
    under_ops += any_under ? 1 : 0;
    scratch_ops += any_scratch ? 1 : 0;
    EXPECT_FALSE(any_under && any_scratch) << what << " at " << tl.ops[op].name;
    if (any_scratch) {
      EXPECT_EQ(tl.ops[op].name.rfind("backward/layer", 0), 0u) << what << " " << tl.ops[op].name;
    }
  }
  EXPECT_GT(under_ops, 0) << what;
  EXPECT_GT(scratch_ops, 0) << what;
}

TEST(ScratchOverLogits, NoOpHasTheScratchAndWhatLiesUnderItLive) {
  for (const Variant& v : variants()) {
    expect_never_live_together(small_trained_config(), kShape,
                               plan_with(v.ops, Precision::amp(DType::BF16), true, v.chunk_rows),
                               v.name);
    expect_never_live_together(fp8_test_config(), kFp8Shape, fp8_plan(v.ops, true),
                               v.name + " fp8");
  }
}

}  // namespace
}  // namespace tinyllama
