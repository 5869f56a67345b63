// StepPlan::scratch_over_logits: the backward scratch that only the layers'
// backward touches lies over the LM head's logits in the arena. The arena is
// smaller by the lesser of the two, and nothing else changes: the same
// losses, gradients and weights to the bit, at every level, with the loss in
// one pass or in chunks; a traced step never has the logits and that scratch
// live at one op.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/activation_plan.h"
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

std::int64_t reserved(const ActivationBuffer& b) {
  return b.bytes;
}

TEST(ScratchOverLogits, TheArenaIsSmallerByTheLesserOfTheTwo) {
  for (const Variant& v : variants()) {
    for (const Precision p : {Precision::fp32(), Precision::amp(DType::BF16)}) {
      const ModelConfig cfg = small_trained_config();
      const ActivationPlan apart(cfg, kShape, plan_with(v.ops, p, false, v.chunk_rows));
      const ActivationPlan over(cfg, kShape, plan_with(v.ops, p, true, v.chunk_rows));
      std::int64_t logits = 0, scratch = 0;
      for (const ActivationBuffer& b : over.buffers()) {
        if (b.name == "logits") logits = reserved(b);
        if (!b.over_logits) continue;
        scratch += reserved(b);
        EXPECT_GE(b.slot.offset, over.logits.offset) << v.name << " " << b.name;
      }
      ASSERT_GT(scratch, 0) << v.name;
      EXPECT_EQ(apart.bytes - over.bytes, std::min(logits, scratch)) << v.name;
      for (const ActivationBuffer& b : apart.buffers()) EXPECT_FALSE(b.over_logits) << b.name;
    }
  }
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
  }
}

// The traced step's accesses: the logits are done before the scratch over
// them is first written, and the scratch is live only inside the layers'
// backward. Were a layer's backward to read the logits, or the loss to
// write the scratch, the timeline would see them live at one op.
TEST(ScratchOverLogits, NoOpHasTheLogitsAndTheScratchOverThemLive) {
  for (const Variant& v : variants()) {
    const StepPlan plan = plan_with(v.ops, Precision::amp(DType::BF16), true, v.chunk_rows);
    const ActivationPlan acts(small_trained_config(), kShape, plan);
    std::vector<std::string> over;
    for (const ActivationBuffer& b : acts.buffers()) {
      if (b.over_logits) over.push_back(b.name);
    }
    const prof::MemoryTimeline tl =
        prof::trace_memory_timeline(small_trained_config(), kShape, plan);
    const prof::TimelineBuffer* logits = nullptr;
    std::vector<const prof::TimelineBuffer*> scratch;
    for (const prof::TimelineBuffer& b : tl.buffers) {
      if (b.name == "logits") logits = &b;
      if (std::find(over.begin(), over.end(), b.name) != over.end()) scratch.push_back(&b);
    }
    ASSERT_NE(logits, nullptr) << v.name;
    ASSERT_EQ(scratch.size(), over.size()) << v.name;
    int logits_ops = 0, scratch_ops = 0;
    for (int op = 0; op < static_cast<int>(tl.ops.size()); ++op) {
      const bool any_scratch = std::any_of(scratch.begin(), scratch.end(),
                                           [&](const auto* b) { return b->live_at(op); });
      logits_ops += logits->live_at(op) ? 1 : 0;
      scratch_ops += any_scratch ? 1 : 0;
      EXPECT_FALSE(logits->live_at(op) && any_scratch) << v.name << " at " << tl.ops[op].name;
      if (any_scratch) {
        EXPECT_EQ(tl.ops[op].name.rfind("backward/layer", 0), 0u)
            << v.name << " " << tl.ops[op].name;
      }
    }
    EXPECT_GT(logits_ops, 0) << v.name;
    EXPECT_GT(scratch_ops, 0) << v.name;
  }
}

}  // namespace
}  // namespace tinyllama
