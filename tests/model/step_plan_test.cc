// resolve_plan: the one place that decides each op's implementation, the
// execution, loss scaling and the kernel families, from the device's facts,
// with a reason for every fallback.
#include "model/step_plan.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "model/step_plan_json.h"
#include "model/test_plans.h"

namespace tinyllama {
namespace {

DeviceCaps gpu_like_caps() {
  DeviceCaps caps = graph_capable_cpu_caps();
  caps.kind = DeviceKind::Cuda;
  caps.flash_head_dims = {32, 64, 128};
  caps.no_programmatic_launch = "";  // an sm_90 device
  return caps;
}

ModelConfig with_head_dim(int hd) {
  ModelConfig cfg;
  cfg.num_heads = 4;
  cfg.num_kv_heads = 2;
  cfg.hidden_dim = 4 * hd;
  return cfg;
}

TEST(StepPlan, AHeadDimWithoutFlashKernelsFallsBackToMaterialisedWithAReason) {
  const BatchShape shape{2, 16};
  const StepPlan plan =
      plan_for_level("v2", Precision::fp32(), gpu_like_caps(), with_head_dim(96), shape);
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Materialized);
  ASSERT_EQ(plan.fallbacks.size(), 1u);
  EXPECT_EQ(plan.fallbacks[0].op, "attention");
  EXPECT_EQ(plan.fallbacks[0].wanted, "flash");
  EXPECT_EQ(plan.fallbacks[0].using_, "materialized");
  EXPECT_NE(plan.fallbacks[0].reason.find("head_dim 32, 64, 128 (this model: 96)"),
            std::string::npos)
      << plan.fallbacks[0].reason;

  const StepPlan ok =
      plan_for_level("v2", Precision::fp32(), gpu_like_caps(), with_head_dim(64), shape);
  EXPECT_EQ(ok.ops.attention, AttentionImpl::Flash);
  EXPECT_TRUE(ok.fallbacks.empty());
  EXPECT_TRUE(ok.captured());
  EXPECT_TRUE(ok.parallel_branches);
  EXPECT_TRUE(ok.updates_layers_in_backward());
}

TEST(StepPlan, TheCpuRunsEagerlyAndOneSweepWithReasons) {
  const StepPlan plan =
      plan_for_level("v2", Precision::fp32(), DeviceCaps::cpu(), with_head_dim(96), {2, 8});
  EXPECT_EQ(plan.ops.attention, AttentionImpl::Flash) << "the cpu reference has any head_dim";
  EXPECT_EQ(plan.ops.execution, Execution::Eager);
  EXPECT_EQ(plan.ops.optimizer, OptimizerImpl::Fused);
  EXPECT_FALSE(plan.parallel_branches);
  ASSERT_EQ(plan.fallbacks.size(), 2u);
  EXPECT_EQ(plan.fallbacks[0].describe(), "execution graph -> eager: the cpu backend runs eagerly");
  EXPECT_EQ(plan.fallbacks[1].op, "optimizer");
  EXPECT_NE(plan.fallbacks[1].reason.find("runs eagerly"), std::string::npos);
  EXPECT_TRUE(plan.workspaces.empty()) << "resolve_plan leaves them to the backend";
}

TEST(StepPlan, Fp16ScalesTheLossAndKeepsOneSweepAfterTheScan) {
  const StepPlan plan =
      plan_for_level("v2", Precision::amp(DType::F16), gpu_like_caps(), with_head_dim(64), {2, 8});
  EXPECT_EQ(plan.loss_scaling, LossScaling::Dynamic);
  EXPECT_EQ(plan.ops.optimizer, OptimizerImpl::Fused);
  EXPECT_TRUE(plan.parallel_branches) << "the weight-gradient branch stays";
  ASSERT_EQ(plan.fallbacks.size(), 1u);
  EXPECT_NE(plan.fallbacks[0].reason.find("overflow scan"), std::string::npos);

  const StepPlan bf16 =
      plan_for_level("v2", Precision::amp(DType::BF16), gpu_like_caps(), with_head_dim(64), {2, 8});
  EXPECT_EQ(bf16.loss_scaling, LossScaling::None);
  EXPECT_EQ(bf16.ops.optimizer, OptimizerImpl::FusedPerLayer);
}

TEST(StepPlan, SingleChangesChangeExactlyOneChoiceEach) {
  for (const std::string& level : implemented_levels()) {
    const OpChoices preset = level_preset(level);
    const std::vector<OpChoices> changes = single_changes(preset);
    // qkv, gate_up, norm, rope, embedding_grad, loss, gemm_epilogue,
    // execution: one other each; swiglu, optimizer and activations: two; attention:
    // two other implementations, or all three under v4's auto (a way to
    // choose, not an implementation).
    // Under v3's and v4's activations auto, all three are changes too, and
    // under v4's kernel_launch auto both plain and pdl (else the other one).
    const std::size_t attention = preset.attention == AttentionImpl::Auto ? 3 : 2;
    const std::size_t activations = preset.activations == ActivationsImpl::Auto ? 3 : 2;
    const std::size_t launch = preset.kernel_launch == KernelLaunch::Auto ? 2 : 1;
    EXPECT_EQ(changes.size(), 12u + attention + activations + launch) << level;
    for (const OpChoices& c : changes) {
      int differing = 0;
      const auto a = named_choices(preset);
      const auto b = named_choices(c);
      for (std::size_t i = 0; i < a.size(); ++i) {
        differing += std::string(a[i].impl) != b[i].impl ? 1 : 0;
      }
      EXPECT_EQ(differing, 1) << level << ": " << named_summary(c);
    }
  }
  // Both presets, then their single changes without repeats.
  std::set<std::string> names;
  for (const PlanVariant& v : level_variants()) EXPECT_TRUE(names.insert(v.name).second) << v.name;
  EXPECT_GE(level_variants().size(), 12u);
}

// v4 launches its kernels programmatically where the device can, under
// mixed precision (auto); v1-v3 stay plain.
TEST(StepPlan, KernelLaunchIsPdlAtV4OnlyAndFallsBackWithAReason) {
  for (const char* level : {"v1", "v2", "v3"}) {
    EXPECT_EQ(level_preset(level).kernel_launch, KernelLaunch::Plain) << level;
  }
  EXPECT_EQ(level_preset("v4").kernel_launch, KernelLaunch::Auto);
  const StepPlan amp =
      plan_for_level("v4", Precision::amp(DType::BF16), gpu_like_caps(), with_head_dim(64), {2, 8});
  EXPECT_EQ(amp.ops.kernel_launch, KernelLaunch::Pdl);
  EXPECT_EQ(amp.kernel_launch_auto, "auto chose pdl: mixed precision");
  EXPECT_NE(amp.describe().find("kernel_launch pdl"), std::string::npos) << amp.describe();
  EXPECT_EQ(plan_json(amp)["kernel_launch_auto"], "auto chose pdl: mixed precision");
  const StepPlan full =
      plan_for_level("v4", Precision::fp32(), gpu_like_caps(), with_head_dim(64), {2, 8});
  EXPECT_EQ(full.ops.kernel_launch, KernelLaunch::Plain);
  EXPECT_EQ(full.kernel_launch_auto, "auto chose plain: full precision (fp32 ran slower with pdl)");
  for (const Fallback& f : full.fallbacks) EXPECT_NE(f.op, "kernel_launch") << f.describe();

  OpChoices pdl = level_preset("v2");
  pdl.kernel_launch = KernelLaunch::Pdl;
  const StepPlan gpu =
      plan_for_choices(pdl, Precision::fp32(), gpu_like_caps(), with_head_dim(64), {2, 8});
  EXPECT_EQ(gpu.ops.kernel_launch, KernelLaunch::Pdl);
  EXPECT_TRUE(gpu.fallbacks.empty());
  EXPECT_NE(gpu.describe().find("kernel_launch pdl"), std::string::npos) << gpu.describe();
  EXPECT_EQ(plan_json(gpu)["ops"]["kernel_launch"], "pdl");

  // The CPU backend launches no kernels; an older GPU has no PDL.
  const StepPlan cpu =
      plan_for_choices(pdl, Precision::fp32(), DeviceCaps::cpu(), with_head_dim(64), {2, 8});
  EXPECT_EQ(cpu.ops.kernel_launch, KernelLaunch::Plain);
  ASSERT_FALSE(cpu.fallbacks.empty());
  EXPECT_EQ(cpu.fallbacks.back().describe(),
            "kernel_launch pdl -> plain: the cpu backend launches no kernels");
  EXPECT_NE(cpu.describe().find("kernel_launch plain"), std::string::npos) << cpu.describe();
  EXPECT_EQ(plan_json(cpu)["fallbacks"].back()["op"], "kernel_launch");

  DeviceCaps ampere = gpu_like_caps();
  ampere.no_programmatic_launch =
      "programmatic dependent launch needs sm_90 or newer (this device: sm_80)";
  const StepPlan old =
      plan_for_level("v4", Precision::amp(DType::BF16), ampere, with_head_dim(64), {2, 8});
  EXPECT_EQ(old.ops.kernel_launch, KernelLaunch::Plain);
  bool said = false;
  for (const Fallback& f : old.fallbacks) {
    if (f.op == "kernel_launch") said = f.reason == ampere.no_programmatic_launch;
  }
  EXPECT_TRUE(said) << "the device's reason is the fallback's";
}

TEST(StepPlan, JsonNamesEveryOpAndFallback) {
  const StepPlan plan =
      plan_for_level("v2", Precision::fp32(), gpu_like_caps(), with_head_dim(96), {2, 16});
  const nlohmann::json j = plan_json(plan);
  EXPECT_EQ(j["level"], "v2");
  EXPECT_EQ(j["device"], "cuda");
  EXPECT_EQ(j["ops"].size(), named_choices(plan.ops).size());
  EXPECT_EQ(j["ops"]["attention"], "materialized");
  EXPECT_EQ(j["ops"]["optimizer"], "fused_per_layer");
  EXPECT_EQ(j["loss_scaling"], "none");
  EXPECT_EQ(j["workspace_bytes"], plan.workspace_bytes());
  EXPECT_EQ(j["kernels"]["flash_forward"], "mma") << "no Hopper kernels in these facts";
  EXPECT_EQ(j["kernels"]["loss_rows"], "auto");
  EXPECT_EQ(j["kernels"].size(), 8u);
  ASSERT_EQ(j["fallbacks"].size(), 1u);
  EXPECT_EQ(j["fallbacks"][0]["using"], "materialized");
}

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

TEST(StepPlan, AutoTimesFlashAndCudnnAndKeepsTheFaster) {
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
TEST(StepPlan, AutoTakesTheSmallerWorkspaceOfTiedTimings) {
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

TEST(StepPlan, AutoWithOneCandidateTakesItUntimedAndSaysWhy) {
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

TEST(StepPlan, CudnnFallsBackToFlashThenMaterialisedWithAReasonEach) {
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
TEST(StepPlan, AutoPairsCudnnsForwardWithOurBackwardWhereThatIsFastest) {
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
TEST(StepPlan, CudnnFlashFallsBackToTheHalfThatRuns) {
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
TEST(StepPlan, AutoTakesASavedChoiceWithoutTimingAgain) {
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
TEST(StepPlan, ASavedChoiceThatCannotRunIsChosenAgain) {
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

namespace tinyllama {
namespace {

// v3's activations auto: recompute where hidden >= 2048 and tokens x
// hidden >= 2^22, stored elsewhere; the plan says which and why, in the
// header line and the JSON.
TEST(StepPlan, ActivationsAutoRecomputesOnlyWideLargeSteps) {
  ModelConfig narrow = with_head_dim(64);
  narrow.hidden_dim = 512;
  narrow.num_heads = 8;
  narrow.num_kv_heads = 4;
  const StepPlan big_narrow =
      plan_for_level("v3", Precision::fp32(), gpu_like_caps(), narrow, {32, 1024});
  EXPECT_EQ(big_narrow.ops.activations, ActivationsImpl::Stored);
  EXPECT_EQ(big_narrow.activations_auto,
            "auto chose stored: hidden 512 < 2048, 32768 tokens x hidden >= 4194304");
  ModelConfig wide = with_head_dim(64);
  wide.hidden_dim = 2048;
  wide.num_heads = 32;
  wide.num_kv_heads = 16;
  // 2048 tokens x 2048 = 2^22 exactly: both thresholds are inclusive.
  const StepPlan large = plan_for_level("v3", Precision::fp32(), gpu_like_caps(), wide, {2, 1024});
  EXPECT_EQ(large.ops.activations, ActivationsImpl::RecomputeNormsSwiglu);
  EXPECT_EQ(large.activations_auto,
            "auto chose recompute: hidden 2048 >= 2048, 2048 tokens x hidden >= 4194304");
  EXPECT_EQ(plan_json(large)["activations_auto"], large.activations_auto);
  const StepPlan small = plan_for_level("v3", Precision::fp32(), gpu_like_caps(), wide, {1, 128});
  EXPECT_EQ(small.ops.activations, ActivationsImpl::Stored);
  // An explicit choice is kept and says nothing.
  const StepPlan v2 = plan_for_level("v2", Precision::fp32(), gpu_like_caps(), wide, {2, 1024});
  EXPECT_EQ(v2.ops.activations, ActivationsImpl::Stored);
  EXPECT_TRUE(v2.activations_auto.empty());
}

}  // namespace
}  // namespace tinyllama
