// Level presets (DESIGN §2) and the workshop's --enable/--disable toggles
// on top of them.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "core/errors.h"
#include "train/level_select.h"

namespace tinyllama {
namespace {

// v2's choices: every toggle on.
bool all_on(const OpChoices& o) {
  return o == level_preset("v2");
}
// v1's choices: every toggle off.
bool all_off(const OpChoices& o) {
  return o == level_preset("v1");
}

TEST(LevelSelect, V1IsTheBaselineAndV2TurnsEveryToggleOn) {
  const OpChoices v1 = level_preset("v1");
  EXPECT_EQ(v1.qkv_gemm, GemmGrouping::Separate);
  EXPECT_EQ(v1.attention, AttentionImpl::Materialized);
  EXPECT_EQ(v1.swiglu, SwigluImpl::Separate);
  EXPECT_EQ(v1.optimizer, OptimizerImpl::PerTensor);
  EXPECT_EQ(v1.execution, Execution::Eager);
  const OpChoices v2 = level_preset("v2");
  EXPECT_EQ(v2.gate_up_gemm, GemmGrouping::Fused);
  EXPECT_EQ(v2.attention, AttentionImpl::Flash);
  EXPECT_EQ(v2.optimizer, OptimizerImpl::FusedPerLayer);
  EXPECT_EQ(v2.execution, Execution::Graph);
  const OpChoices v3 = level_preset("v3");
  EXPECT_EQ(v3.norm, NormImpl::Fused);
  OpChoices v2_fused = v2;
  v2_fused.norm = NormImpl::Fused;
  v2_fused.loss = LossImpl::Chunked;
  v2_fused.rope = RopeImpl::Fused;
  v2_fused.activations = ActivationsImpl::Auto;
  v2_fused.grad_buffers = GradBuffers::Ring;
  EXPECT_EQ(v3, v2_fused) << "v3 is v2 with the fused kernels";
  EXPECT_EQ(v3.attention, AttentionImpl::Flash) << "v3 keeps our own flash (DESIGN §2)";
  EXPECT_EQ(v3.execution, Execution::Graph);
  EXPECT_EQ(v2.norm, NormImpl::Plain);
  const OpChoices v4 = level_preset("v4");
  OpChoices v3_epilogue = v3;
  v3_epilogue.epilogue = GemmEpilogue::Residual;
  v3_epilogue.attention = AttentionImpl::Auto;
  v3_epilogue.kernel_launch = KernelLaunch::Auto;
  EXPECT_EQ(v4, v3_epilogue)
      << "v4 is v3 with the adds in GEMM epilogues, attention auto and programmatic launches";
  EXPECT_EQ(v3.epilogue, GemmEpilogue::None);
  EXPECT_NO_THROW(level_preset(kDefaultLevel));
}

TEST(LevelSelect, NormFlagOverridesThePreset) {
  ToggleFlags f;
  f.norm = "fused";
  EXPECT_EQ(apply_toggle_flags(level_preset("v2"), f).norm, NormImpl::Fused);
  f.norm = "plain";
  EXPECT_EQ(apply_toggle_flags(level_preset("v3"), f).norm, NormImpl::Plain);
  f.norm = "fast";
  try {
    apply_toggle_flags(level_preset("v3"), f);
    ADD_FAILURE() << "--norm fast was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("plain, fused"), std::string::npos) << e.what();
  }
}

TEST(LevelSelect, GemmEpilogueFlagOverridesThePreset) {
  ToggleFlags f;
  f.gemm_epilogue = "residual";
  EXPECT_EQ(apply_toggle_flags(level_preset("v2"), f).epilogue, GemmEpilogue::Residual);
  f.gemm_epilogue = "none";
  EXPECT_EQ(apply_toggle_flags(level_preset("v4"), f).epilogue, GemmEpilogue::None);
  f.gemm_epilogue = "bias";
  try {
    apply_toggle_flags(level_preset("v4"), f);
    ADD_FAILURE() << "--gemm-epilogue bias was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("none, residual"), std::string::npos) << e.what();
  }
}

TEST(LevelSelect, KernelLaunchFlagOverridesThePreset) {
  ToggleFlags f;
  f.kernel_launch = "pdl";
  EXPECT_EQ(apply_toggle_flags(level_preset("v2"), f).kernel_launch, KernelLaunch::Pdl);
  f.kernel_launch = "plain";
  const OpChoices v4 = apply_toggle_flags(level_preset("v4"), f);
  EXPECT_EQ(v4.kernel_launch, KernelLaunch::Plain);
  OpChoices only_that = level_preset("v4");
  only_that.kernel_launch = KernelLaunch::Plain;
  EXPECT_EQ(v4, only_that) << "nothing else changes";
  f.kernel_launch = "graph";
  try {
    apply_toggle_flags(level_preset("v4"), f);
    ADD_FAILURE() << "--kernel-launch graph was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("plain, pdl, auto"), std::string::npos) << e.what();
  }
}

// --optimizer names each choice alone on any preset; with the
// --enable/--disable-fused-optimizer toggle it is refused, as is an unknown name.
TEST(LevelSelect, OptimizerFlagNamesEachChoice) {
  const std::pair<const char*, OptimizerImpl> names[] = {
      {"per_tensor", OptimizerImpl::PerTensor},
      {"fused", OptimizerImpl::Fused},
      {"fused_per_layer", OptimizerImpl::FusedPerLayer}};
  for (const char* level : {"v1", "v2", "v4"}) {
    for (const auto& [name, impl] : names) {
      ToggleFlags f;
      f.optimizer = name;
      OpChoices expected = level_preset(level);
      expected.optimizer = impl;
      EXPECT_EQ(apply_toggle_flags(level_preset(level), f), expected) << level << " " << name;
      EXPECT_STREQ(impl_name(impl), name);
    }
  }
  ToggleFlags both;
  both.optimizer = "fused";
  both.fused_optimizer.disable = true;
  EXPECT_THROW(apply_toggle_flags(level_preset("v4"), both), UsageError);
  ToggleFlags unknown;
  unknown.optimizer = "sgd";
  try {
    apply_toggle_flags(level_preset("v4"), unknown);
    ADD_FAILURE() << "--optimizer sgd was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("per_tensor, fused, fused_per_layer"), std::string::npos)
        << e.what();
  }
}

// --activations names each choice alone, on top of any preset, and nothing
// else changes; an unknown name is refused with the allowed ones.
TEST(LevelSelect, ActivationsFlagNamesEachChoice) {
  const std::pair<const char*, ActivationsImpl> names[] = {
      {"stored", ActivationsImpl::Stored},
      {"recompute_norms", ActivationsImpl::RecomputeNorms},
      {"recompute", ActivationsImpl::RecomputeNormsSwiglu}};
  for (const char* level : {"v1", "v2", "v3"}) {
    for (const auto& [name, impl] : names) {
      ToggleFlags f;
      f.activations = name;
      OpChoices expected = level_preset(level);
      expected.activations = impl;
      EXPECT_EQ(apply_toggle_flags(level_preset(level), f), expected) << level << " " << name;
      EXPECT_STREQ(impl_name(impl), name);
    }
  }
  ToggleFlags f;
  f.activations = "recompute_all";
  try {
    apply_toggle_flags(level_preset("v2"), f);
    ADD_FAILURE() << "--activations recompute_all was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "--activations recompute_all: allowed values are stored, recompute_norms, "
                  "recompute"),
              std::string::npos)
        << e.what();
  }
}

TEST(LevelSelect, UnknownLevelsAreRefusedByName) {
  for (const char* name : {"v5", "v9", ""}) {
    try {
      level_preset(name);
      ADD_FAILURE() << name << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--version"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("v1, v2, v3, v4"), std::string::npos) << e.what();
    }
  }
}

TEST(LevelSelect, TogglesApplyOnTopOfThePresetInAFixedOrder) {
  ToggleFlags f;
  f.cuda_graphs.disable = true;
  const OpChoices v2_eager = apply_toggle_flags(level_preset("v2"), f);
  EXPECT_EQ(v2_eager.execution, Execution::Eager);
  OpChoices expected = level_preset("v2");
  expected.execution = Execution::Eager;
  EXPECT_EQ(v2_eager, expected) << "only the execution changes";

  ToggleFlags g;
  g.all_fusion.enable = true;
  g.flash_attention.disable = true;  // single toggles win over the all-fusion pair
  const OpChoices l = apply_toggle_flags(level_preset("v1"), g);
  EXPECT_EQ(l.qkv_gemm, GemmGrouping::Fused);
  EXPECT_EQ(l.swiglu, SwigluImpl::Fused);
  EXPECT_EQ(l.execution, Execution::Graph);
  EXPECT_EQ(l.attention, AttentionImpl::Materialized);
}

TEST(LevelSelect, SwigluFusionSetsTheGateUpGemmAndTheActivation) {
  ToggleFlags f;
  f.swiglu_fusion.enable = true;
  const OpChoices o = apply_toggle_flags(level_preset("v1"), f);
  EXPECT_EQ(o.gate_up_gemm, GemmGrouping::Fused);
  EXPECT_EQ(o.swiglu, SwigluImpl::Fused);
  EXPECT_EQ(o.qkv_gemm, GemmGrouping::Separate);
}

TEST(LevelSelect, FusedOptimizerHasItsOwnPairAndFollowsAllFusion) {
  ToggleFlags f;
  f.fused_optimizer.disable = true;
  const OpChoices v2_split = apply_toggle_flags(level_preset("v2"), f);
  EXPECT_EQ(v2_split.optimizer, OptimizerImpl::PerTensor);
  EXPECT_EQ(v2_split.execution, Execution::Graph);

  ToggleFlags g;
  g.fused_optimizer.enable = true;
  EXPECT_EQ(apply_toggle_flags(level_preset("v1"), g).optimizer, OptimizerImpl::FusedPerLayer);

  ToggleFlags all_off_flags;
  all_off_flags.all_fusion.disable = true;
  EXPECT_TRUE(all_off(apply_toggle_flags(level_preset("v2"), all_off_flags)));
  ToggleFlags all_on_flags;
  all_on_flags.all_fusion.enable = true;
  EXPECT_TRUE(all_on(apply_toggle_flags(level_preset("v1"), all_on_flags)));
  ToggleFlags both;
  both.fused_optimizer.enable = both.fused_optimizer.disable = true;
  EXPECT_THROW(apply_toggle_flags(level_preset("v2"), both), UsageError);
}

TEST(LevelSelect, BothHalvesOfAPairAreContradictory) {
  ToggleFlags f;
  f.cuda_graphs.enable = f.cuda_graphs.disable = true;
  EXPECT_THROW(apply_toggle_flags(level_preset("v2"), f), UsageError);
}

TEST(LevelSelect, AttentionFlagNamesAnyImplementationAndConflictsWithTheFlashPair) {
  ToggleFlags f;
  for (const char* name : {"materialized", "flash", "cudnn", "auto"}) {
    f.attention = name;
    EXPECT_STREQ(impl_name(apply_toggle_flags(level_preset("v1"), f).attention), name);
  }
  f.attention = "sdpa";
  try {
    apply_toggle_flags(level_preset("v2"), f);
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "allowed values are materialized, flash, cudnn, cudnn+flash, auto"),
              std::string::npos);
  }
  f.attention = "cudnn";
  f.flash_attention.disable = true;
  EXPECT_THROW(apply_toggle_flags(level_preset("v2"), f), UsageError);
}

}  // namespace
}  // namespace tinyllama
