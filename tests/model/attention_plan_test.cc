// attention=auto and the attention fallbacks in resolve_plan: the timed
// choice among flash, cudnn and cuDNN's forward with our backward (ties
// settled by workspace), a saved choice taken on resume, and a reason for
// every fallback.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "model/step_plan.h"
#include "model/step_plan_json.h"
#include "model/test_plans.h"
#include "plan_test_caps.h"

namespace tinyllama {
namespace {

// A device with cuDNN for bf16/fp16 only (as on CUDA) and a timer that
// reports the given times. Its facts are measured as train's run_caps
// measures them: cuDNN's answer for the run's precision, and the two
// timings only where attention_timings_wanted says the plan compares them
// (counted in calls).
struct TimedCaps {
  AttentionTiming flash{0.30, 0.70};
  AttentionTiming cudnn{0.20, 0.50};
  bool has_cudnn = true;
  int calls = 0;

  DeviceCaps caps(const PlanRequest& request, const ModelConfig& cfg) {
    DeviceCaps c = gpu_like_caps();
    c.times_attention = true;
    if (has_cudnn) {
      c.cudnn_attention = request.precision.compute == DType::F32
                              ? std::string("cuDNN SDPA runs bf16 and fp16 only")
                              : std::string();
    }
    if (attention_timings_wanted(request, c, cfg)) {
      calls += 2;
      c.flash_timing = flash;
      c.cudnn_timing = cudnn;
    }
    return c;
  }
  StepPlan resolve(const PlanRequest& request, const ModelConfig& cfg, BatchShape shape) {
    return resolve_plan(request, caps(request, cfg), cfg, shape);
  }
  StepPlan plan(const OpChoices& ops, Precision precision, const ModelConfig& cfg,
                BatchShape shape) {
    PlanRequest request;
    request.level = "custom";
    request.ops = ops;
    request.precision = precision;
    return resolve(request, cfg, shape);
  }
};

OpChoices with_attention(AttentionImpl impl) {
  OpChoices ops = level_preset("v2");
  ops.attention = impl;
  return ops;
}

TEST(AttentionPlan, AutoTimesFlashAndCudnnAndKeepsTheFaster) {
  const Precision bf16 = Precision::amp(DType::BF16);
  TimedCaps t;
  StepPlan plan = t.plan(with_attention(AttentionImpl::Auto), bf16, with_head_dim(64), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Cudnn);
  EXPECT_EQ(t.calls, 2);
  EXPECT_TRUE(plan.attention_auto.requested);
  EXPECT_DOUBLE_EQ(plan.attention_auto.cudnn.total_ms(), 0.70);
  EXPECT_DOUBLE_EQ(plan.attention_auto.flash.total_ms(), 1.00);
  EXPECT_TRUE(plan.fallbacks.empty());  // a choice, not a fallback
  const std::string line = plan.attention_auto.describe(plan.ops.attention);
  EXPECT_EQ(line.rfind("auto chose cudnn per layer: cudnn 0.700 ms", 0), 0u) << line;
  EXPECT_NE(line.find("flash 1.000 ms (fwd 0.300 ms, bwd 0.700 ms)"), std::string::npos) << line;

  t.flash = {0.10, 0.20};  // now ours is faster
  plan = t.plan(with_attention(AttentionImpl::Auto), bf16, with_head_dim(64), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Flash);

  const nlohmann::json j = plan_json(plan);
  EXPECT_EQ(j["ops"]["attention"], "flash");
  EXPECT_EQ(j["attention_auto"]["chosen"], "flash");
  EXPECT_DOUBLE_EQ(j["attention_auto"]["flash"]["forward_ms"].get<double>(), 0.10);
  EXPECT_DOUBLE_EQ(j["attention_auto"]["cudnn"]["total_ms"].get<double>(), 0.70);
}

// Pairings within 1 % of the fastest are a tie, settled by the workspace
// the step would keep for them; outside it the fastest wins whatever it
// takes.
TEST(AttentionPlan, AutoTakesTheSmallerWorkspaceOfTiedTimings) {
  const Precision bf16 = Precision::amp(DType::BF16);
  TimedCaps t;
  t.flash = {0.40, 0.60, 0, 134'000'000};
  t.cudnn = {0.40, 0.605, 1'000'000, 4'000'000};  // 0.5 % slower, a 4 MB workspace
  StepPlan plan = t.plan(with_attention(AttentionImpl::Auto), bf16, with_head_dim(64), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Cudnn);
  const std::string line = plan.attention_auto.describe(plan.ops.attention);
  EXPECT_NE(line.find("within 1 % of the fastest (flash), the smaller workspace: 4.0 MB against "
                      "134.0 MB"),
            std::string::npos)
      << line;
  const nlohmann::json j = plan_json(plan);
  EXPECT_EQ(j["attention_auto"]["cudnn"]["workspace_bytes"], 4'000'000);
  // A checkpoint keeps the workspaces; one written before they were kept
  // reads as none.
  nlohmann::json saved = attention_choice_json(plan);
  EXPECT_EQ(attention_choice_from_json(saved, "ck").how.cudnn.workspace_bytes, 4'000'000);
  saved["cudnn"].erase("workspace_bytes");
  saved["cudnn"].erase("forward_workspace_bytes");
  EXPECT_EQ(attention_choice_from_json(saved, "old").how.cudnn.workspace_bytes, 0);

  t.cudnn = {0.40, 0.62, 1'000'000, 4'000'000};  // 2 % slower: no tie
  plan = t.plan(with_attention(AttentionImpl::Auto), bf16, with_head_dim(64), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Flash);
  EXPECT_EQ(plan.attention_auto.describe(plan.ops.attention).find("smaller workspace"),
            std::string::npos);
}

TEST(AttentionPlan, AutoWithOneCandidateTakesItUntimedAndSaysWhy) {
  TimedCaps t;
  // fp32: cuDNN is out, flash runs.
  StepPlan plan =
      t.plan(with_attention(AttentionImpl::Auto), Precision::fp32(), with_head_dim(64), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Flash);
  EXPECT_EQ(t.calls, 0);
  ASSERT_EQ(plan.attention_auto.notes.size(), 1u);
  EXPECT_EQ(plan.attention_auto.notes[0], "cudnn: cuDNN SDPA runs bf16 and fp16 only");
  EXPECT_TRUE(plan_json(plan)["attention_auto"]["cudnn"].is_null());

  // head_dim 96 in bf16: our flash kernels lack it, cuDNN runs it.
  plan = t.plan(with_attention(AttentionImpl::Auto), Precision::amp(DType::BF16), with_head_dim(96),
                {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Cudnn);
  // Neither (fp32, head_dim 96): materialised, which runs anything.
  plan = t.plan(with_attention(AttentionImpl::Auto), Precision::fp32(), with_head_dim(96), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Materialized);
  EXPECT_EQ(plan.attention_auto.notes.size(), 2u);
  EXPECT_EQ(t.calls, 0);
}

TEST(AttentionPlan, CudnnFallsBackToFlashThenMaterialisedWithAReasonEach) {
  TimedCaps t;
  StepPlan plan =
      t.plan(with_attention(AttentionImpl::Cudnn), Precision::fp32(), with_head_dim(64), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Flash);
  ASSERT_EQ(plan.fallbacks.size(), 1u);
  EXPECT_EQ(plan.fallbacks[0].describe(),
            "attention cudnn -> flash: cuDNN SDPA runs bf16 and fp16 only");
  EXPECT_FALSE(plan.attention_auto.requested);

  plan =
      t.plan(with_attention(AttentionImpl::Cudnn), Precision::fp32(), with_head_dim(96), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Materialized);
  EXPECT_EQ(plan.fallbacks.size(), 2u);

  // A device without cuDNN (the CPU) names that.
  plan = plan_for_choices(with_attention(AttentionImpl::Cudnn), Precision::amp(DType::BF16),
                          DeviceCaps::cpu(), with_head_dim(64), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Flash);
  ASSERT_EQ(plan.fallbacks.size(), 3u);  // and the CPU runs eagerly, one sweep
  EXPECT_EQ(plan.fallbacks[0].reason, "the cpu backend has no cuDNN");

  // Runs where it can: no fallback, nothing timed.
  plan = t.plan(with_attention(AttentionImpl::Cudnn), Precision::amp(DType::BF16),
                with_head_dim(128), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Cudnn);
  EXPECT_TRUE(plan.fallbacks.empty());
  EXPECT_EQ(t.calls, 0);
}

// Where cuDNN's forward and our backward are each the faster of their pass,
// auto pairs them: cudnn+flash, cuDNN's forward then our flash backward.
TEST(AttentionPlan, AutoPairsCudnnsForwardWithOurBackwardWhereThatIsFastest) {
  const Precision bf16 = Precision::amp(DType::BF16);
  TimedCaps t;
  t.flash = {0.30, 0.50};  // 0.80 in all
  t.cudnn = {0.20, 0.65};  // 0.85 in all; cuDNN's forward with our backward: 0.70
  const StepPlan plan =
      t.plan(with_attention(AttentionImpl::Auto), bf16, with_head_dim(64), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::CudnnFlash);
  EXPECT_EQ(t.calls, 2) << "each candidate timed once, both passes";
  EXPECT_EQ(forward_attention(plan.ops.attention), AttentionImpl::Cudnn);
  EXPECT_EQ(backward_attention(plan.ops.attention), AttentionImpl::Flash);
  EXPECT_TRUE(plan.fallbacks.empty());
  const std::string line = plan.attention_auto.describe(plan.ops.attention);
  EXPECT_EQ(line.rfind("auto chose cudnn+flash per layer: cudnn+flash 0.700 ms (cudnn's fwd, "
                       "flash's bwd), flash 0.800 ms",
                       0),
            0u)
      << line;
  const nlohmann::json j = plan_json(plan);
  EXPECT_EQ(j["ops"]["attention"], "cudnn+flash");
  EXPECT_EQ(j["attention_auto"]["chosen"], "cudnn+flash");
  // A checkpoint's copy of the choice reads back as the pairing.
  const SavedAttentionChoice back =
      attention_choice_from_json(attention_choice_json(plan), "ck.safetensors");
  EXPECT_EQ(back.chosen, AttentionImpl::CudnnFlash);
  // Every other choice runs one implementation both ways.
  for (const AttentionImpl a :
       {AttentionImpl::Materialized, AttentionImpl::Flash, AttentionImpl::Cudnn}) {
    EXPECT_EQ(forward_attention(a), a);
    EXPECT_EQ(backward_attention(a), a);
  }
}

// --attention cudnn+flash asked for: kept where both run, else the one
// that runs, saying why.
TEST(AttentionPlan, CudnnFlashFallsBackToTheHalfThatRuns) {
  TimedCaps t;
  StepPlan plan = t.plan(with_attention(AttentionImpl::CudnnFlash), Precision::amp(DType::BF16),
                         with_head_dim(64), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::CudnnFlash);
  EXPECT_TRUE(plan.fallbacks.empty());
  EXPECT_EQ(t.calls, 0);
  plan = t.plan(with_attention(AttentionImpl::CudnnFlash), Precision::fp32(), with_head_dim(64),
                {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Flash);
  ASSERT_EQ(plan.fallbacks.size(), 1u);
  EXPECT_EQ(plan.fallbacks[0].describe(),
            "attention cudnn+flash -> flash: cuDNN SDPA runs bf16 and fp16 only");
  // head_dim 96: our flash kernels lack it, cuDNN runs both passes.
  plan = t.plan(with_attention(AttentionImpl::CudnnFlash), Precision::amp(DType::BF16),
                with_head_dim(96), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Cudnn);
  ASSERT_EQ(plan.fallbacks.size(), 1u);
  EXPECT_EQ(plan.fallbacks[0].op, "attention");
}

// On resume, attention=auto takes the checkpoint's choice and its times
// without calling the timer, even where a new timing would choose the other
// implementation: the resumed run must run the kernels the uninterrupted
// one ran.
TEST(AttentionPlan, AutoTakesASavedChoiceWithoutTimingAgain) {
  const Precision bf16 = Precision::amp(DType::BF16);
  TimedCaps t;  // cuDNN 0.70 ms, flash 1.00 ms: a timing would choose cudnn
  PlanRequest request;
  request.ops = with_attention(AttentionImpl::Auto);
  request.precision = bf16;
  SavedAttentionChoice saved;
  saved.chosen = AttentionImpl::Flash;
  saved.how.flash_timed = saved.how.cudnn_timed = true;
  saved.how.flash = {0.25, 0.5};
  saved.how.cudnn = {0.5, 1.0};
  saved.from = "ck/ckpt-00000006.safetensors";
  request.saved_attention = saved;
  const StepPlan plan = t.resolve(request, with_head_dim(64), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Flash);
  EXPECT_EQ(t.calls, 0) << "a saved choice is not timed again";
  EXPECT_DOUBLE_EQ(plan.attention_auto.flash.total_ms(), 0.75);
  EXPECT_DOUBLE_EQ(plan.attention_auto.cudnn.total_ms(), 1.5);
  const std::string line = plan.attention_auto.describe(plan.ops.attention);
  EXPECT_EQ(line.rfind("auto chose flash (as in ck/ckpt-00000006.safetensors, not timed again) "
                       "per layer: flash 0.750 ms",
                       0),
            0u)
      << line;
  const nlohmann::json j = plan_json(plan);
  EXPECT_EQ(j["attention_auto"]["chosen"], "flash");
  EXPECT_EQ(j["attention_auto"]["reused_from"], "ck/ckpt-00000006.safetensors");

  // The JSON a checkpoint keeps reads back as the same choice.
  const SavedAttentionChoice back =
      attention_choice_from_json(attention_choice_json(plan), "again.safetensors");
  EXPECT_EQ(back.chosen, AttentionImpl::Flash);
  EXPECT_TRUE(back.how.flash_timed && back.how.cudnn_timed);
  EXPECT_DOUBLE_EQ(back.how.cudnn.backward_ms, 1.0);
  EXPECT_EQ(back.from, "again.safetensors");

  // Without a saved choice the same request is timed, and chooses cudnn.
  request.saved_attention.reset();
  EXPECT_EQ(t.resolve(request, with_head_dim(64), {2, 16}).ops.attention, AttentionImpl::Cudnn);
  EXPECT_EQ(t.calls, 2);
  EXPECT_TRUE(plan_json(t.plan(with_attention(AttentionImpl::Auto), bf16, with_head_dim(64),
                               {2, 16}))["attention_auto"]["reused_from"]
                  .is_null());
}

// A saved choice that cannot run here (this device has no cuDNN) is chosen
// again, with a note; an explicit --attention ignores a saved choice.
TEST(AttentionPlan, ASavedChoiceThatCannotRunIsChosenAgain) {
  TimedCaps t;
  PlanRequest request;
  request.ops = with_attention(AttentionImpl::Auto);
  request.precision = Precision::amp(DType::BF16);
  SavedAttentionChoice saved;
  saved.chosen = AttentionImpl::Cudnn;
  saved.from = "ckpt.safetensors";
  request.saved_attention = saved;
  t.has_cudnn = false;
  StepPlan plan = t.resolve(request, with_head_dim(64), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Flash);
  EXPECT_TRUE(plan.attention_auto.reused_from.empty());
  ASSERT_FALSE(plan.attention_auto.notes.empty());
  EXPECT_EQ(plan.attention_auto.notes[0],
            "cudnn from ckpt.safetensors cannot run here (the cuda backend has no cuDNN): chosen "
            "again");

  request.ops.attention = AttentionImpl::Flash;
  request.precision = Precision::amp(DType::BF16);
  t.has_cudnn = true;
  plan = t.resolve(request, with_head_dim(64), {2, 16});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Flash);
  EXPECT_FALSE(plan.attention_auto.requested);
  EXPECT_EQ(t.calls, 0);
}

}  // namespace
}  // namespace tinyllama
