// Level presets (DESIGN §2) and the --enable/--disable toggles on top.
#include <gtest/gtest.h>

#include <string>

#include "core/errors.h"
#include "train/level_select.h"

namespace tinyllama {
namespace {

bool all_on(const LevelOptions& l) {
  return l.qkv_fusion && l.swiglu_fusion && l.flash_attention && l.cuda_graphs && l.fused_optimizer;
}
bool all_off(const LevelOptions& l) {
  return !l.qkv_fusion && !l.swiglu_fusion && !l.flash_attention && !l.cuda_graphs &&
         !l.fused_optimizer;
}

TEST(LevelSelect, V1IsTheBaselineAndV2TurnsEveryToggleOn) {
  EXPECT_TRUE(all_off(level_preset("v1")));
  EXPECT_TRUE(all_on(level_preset("v2")));
  EXPECT_NO_THROW(level_preset(std::string(kDefaultLevel)));
}

TEST(LevelSelect, UnimplementedAndUnknownLevelsAreRefusedByName) {
  for (const char* name : {"v3", "v4", "v9", ""}) {
    try {
      level_preset(name);
      ADD_FAILURE() << name << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--version"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("v1, v2"), std::string::npos) << e.what();
    }
  }
}

TEST(LevelSelect, TogglesApplyOnTopOfThePresetInAFixedOrder) {
  ToggleFlags f;
  f.cuda_graphs.disable = true;
  const LevelOptions v2_eager = apply_toggle_flags(level_preset("v2"), f);
  EXPECT_TRUE(v2_eager.qkv_fusion && v2_eager.swiglu_fusion && v2_eager.flash_attention);
  EXPECT_FALSE(v2_eager.cuda_graphs);

  ToggleFlags g;
  g.all_fusion.enable = true;
  g.flash_attention.disable = true;  // single toggles win over the all-fusion pair
  const LevelOptions l = apply_toggle_flags(level_preset("v1"), g);
  EXPECT_TRUE(l.qkv_fusion && l.swiglu_fusion && l.cuda_graphs);
  EXPECT_FALSE(l.flash_attention);
}

TEST(LevelSelect, FusedOptimizerHasItsOwnPairAndFollowsAllFusion) {
  ToggleFlags f;
  f.fused_optimizer.disable = true;
  const LevelOptions v2_split = apply_toggle_flags(level_preset("v2"), f);
  EXPECT_FALSE(v2_split.fused_optimizer);
  EXPECT_TRUE(v2_split.qkv_fusion && v2_split.cuda_graphs);

  ToggleFlags g;
  g.fused_optimizer.enable = true;
  EXPECT_TRUE(apply_toggle_flags(level_preset("v1"), g).fused_optimizer);

  ToggleFlags all_off_flags;
  all_off_flags.all_fusion.disable = true;
  EXPECT_TRUE(all_off(apply_toggle_flags(level_preset("v2"), all_off_flags)));
  ToggleFlags both;
  both.fused_optimizer.enable = both.fused_optimizer.disable = true;
  EXPECT_THROW(apply_toggle_flags(level_preset("v2"), both), UsageError);
}

TEST(LevelSelect, BothHalvesOfAPairAreContradictory) {
  ToggleFlags f;
  f.cuda_graphs.enable = f.cuda_graphs.disable = true;
  EXPECT_THROW(apply_toggle_flags(level_preset("v2"), f), UsageError);
}

}  // namespace
}  // namespace tinyllama
