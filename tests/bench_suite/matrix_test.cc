#include "bench_suite/matrix.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/errors.h"

namespace tinyllama::suite {
namespace {

TEST(BenchMatrix, DefaultIsEveryLevelTwoPrecisionsThreeSeqsAtB8) {
  const std::vector<BenchPoint> points = expand(default_axes());
  const std::size_t levels = implemented_levels().size();
  ASSERT_EQ(points.size(), levels * 2 * 3);
  std::set<std::string> keys;
  for (const BenchPoint& p : points) {
    EXPECT_EQ(p.batch, 8);
    keys.insert(p.key());
  }
  EXPECT_EQ(keys.size(), points.size()) << "every point has its own key";
  EXPECT_EQ(points.front().key(), implemented_levels().front() + " fp32 B8 S128");
  EXPECT_EQ(points.back().key(), implemented_levels().back() + " bf16 B8 S1024");
}

TEST(BenchMatrix, PointArgsNameLevelPrecisionAndShape) {
  const BenchPoint p{"v1", "fp16", 4, 64, {"norm fused", {"--norm", "fused"}}};
  const std::vector<std::string> want = {"--version", "v1",           "--use-amp", "--amp-dtype",
                                         "float16",   "--batch-size", "4",         "--seq-len",
                                         "64",        "--norm",       "fused"};
  EXPECT_EQ(p.train_args(), want);
  EXPECT_EQ(p.key(), "v1 fp16 B4 S64 [norm fused]");
}

TEST(BenchMatrix, ListsParseAndRejectBadValues) {
  EXPECT_EQ(parse_level_list("all"), implemented_levels());
  EXPECT_EQ(parse_level_list("v2,v1"), (std::vector<std::string>{"v2", "v1"}));
  EXPECT_THROW(parse_level_list("v2,v9"), UsageError);
  EXPECT_EQ(parse_precision_list("fp32,bfloat16,fp16"),
            (std::vector<std::string>{"fp32", "bf16", "fp16"}));
  EXPECT_THROW(parse_precision_list("fp8"), UsageError);
  EXPECT_EQ(parse_int_list("--seq-lens", "128,512"), (std::vector<int>{128, 512}));
  EXPECT_THROW(parse_int_list("--seq-lens", "128,0"), UsageError);
  EXPECT_THROW(parse_int_list("--seq-lens", "12x"), UsageError);
  EXPECT_THROW(parse_int_list("--seq-lens", ""), UsageError);
}

TEST(BenchMatrix, AblationSwitchesFlipEachChoiceOfThePreset) {
  // v1 has every fusion off: each switch turns one on.
  const std::vector<ChoiceSwitch> v1 = ablation_switches(level_preset("v1"));
  ASSERT_EQ(v1.size(), 10u);
  auto has = [](const std::vector<ChoiceSwitch>& list, const std::string& name,
                const std::vector<std::string>& args) {
    return std::any_of(list.begin(), list.end(), [&](const ChoiceSwitch& s) {
      return s.name == name && s.train_args == args;
    });
  };
  EXPECT_TRUE(has(v1, "qkv_fusion on", {"--enable-qkv-fusion"}));
  EXPECT_TRUE(has(v1, "attention flash", {"--attention", "flash"}));
  EXPECT_TRUE(has(v1, "cuda_graphs on", {"--enable-cuda-graphs"}));
  const std::vector<ChoiceSwitch> v3 = ablation_switches(level_preset("v3"));
  EXPECT_TRUE(has(v3, "norm plain", {"--norm", "plain"}));
  EXPECT_TRUE(has(v3, "loss full_logits", {"--loss", "full_logits"}));
  EXPECT_TRUE(has(v3, "fused_optimizer off", {"--disable-fused-optimizer"}));
  EXPECT_TRUE(has(v3, "kernel_launch pdl", {"--kernel-launch", "pdl"}));
  EXPECT_TRUE(has(ablation_switches(level_preset("v4")), "kernel_launch plain",
                  {"--kernel-launch", "plain"}));
}

TEST(BenchMatrix, SwitchesBetweenLevelsUndoOnlyWhatChanged) {
  const std::vector<ChoiceSwitch> v2_over_v1 =
      switches_between(level_preset("v1"), level_preset("v2"));
  std::vector<std::string> names;
  names.reserve(v2_over_v1.size());
  for (const ChoiceSwitch& s : v2_over_v1) names.push_back(s.name);
  EXPECT_EQ(names, (std::vector<std::string>{"qkv_fusion off", "swiglu_fusion off",
                                             "attention materialized", "cuda_graphs off",
                                             "fused_optimizer off"}));
  const std::vector<ChoiceSwitch> v3_over_v2 =
      switches_between(level_preset("v2"), level_preset("v3"));
  ASSERT_EQ(v3_over_v2.size(), 2u);
  EXPECT_EQ(v3_over_v2[0].name, "norm plain");
  EXPECT_EQ(v3_over_v2[1].name, "loss full_logits");
  const std::vector<ChoiceSwitch> v4_over_v3 =
      switches_between(level_preset("v3"), level_preset("v4"));
  ASSERT_EQ(v4_over_v3.size(), 3u);
  EXPECT_EQ(v4_over_v3[0].name, "attention_choice flash");
  EXPECT_EQ(v4_over_v3[0].train_args, (std::vector<std::string>{"--attention", "flash"}));
  EXPECT_EQ(v4_over_v3[1].name, "gemm_epilogue none");
  EXPECT_EQ(v4_over_v3[2].name, "kernel_launch plain");
  EXPECT_EQ(v4_over_v3[2].train_args, (std::vector<std::string>{"--kernel-launch", "plain"}));
}

TEST(BenchMatrix, WithAblationFollowsEachPointByItsSwitches) {
  const std::vector<BenchPoint> points = with_ablation(expand({{"v1", "v3"}, {"fp32"}, {2}, {16}}));
  ASSERT_EQ(points.size(), 2u * 11u);
  EXPECT_TRUE(points[0].variant.name.empty());
  EXPECT_EQ(points[0].level, "v1");
  EXPECT_FALSE(points[1].variant.name.empty());
  EXPECT_EQ(points[11].level, "v3");
  EXPECT_TRUE(points[11].variant.name.empty());
}

}  // namespace
}  // namespace tinyllama::suite
