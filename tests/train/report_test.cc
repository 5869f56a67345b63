// The report's execution fields: how the steps ran, kernel launches per
// step, and null (never a made-up number) for phases that were not timed;
// a data-parallel run's ranks and per-rank memory.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "train/memory_check.h"
#include "train/report.h"

namespace tinyllama {
namespace {

TrainSummary summary_with_one_step(double forward_ms) {
  TrainSummary s;
  StepRecord r;
  r.step = 1;
  r.loss = 3.0;
  r.ms = 2.0;
  r.forward_ms = forward_ms;
  r.backward_ms = forward_ms;
  r.optimizer_ms = forward_ms;
  s.steps.push_back(r);
  s.ms_per_step = 2.0;
  s.forward_ms = s.backward_ms = s.optimizer_ms = forward_ms;
  s.final_loss = 3.0;
  return s;
}

TEST(Report, GraphRunsReportTheirLaunchesPerStep) {
  TrainSummary s = summary_with_one_step(0.5);
  s.execution = "cuda_graph";
  s.launches = GraphStats{120, 1, 0, 2};
  TrainOptions o;
  o.plan.device = DeviceKind::Cuda;
  const nlohmann::json j = json_report(s, o);
  EXPECT_EQ(j["execution"], "cuda_graph");
  EXPECT_EQ(j["kernel_launches_per_step"], 120);
  EXPECT_EQ(j["graph_nodes_per_step"]["memsets"], 1);
  EXPECT_EQ(j["forward_ms"], 0.5);
  EXPECT_EQ(j["phases_timed"], true);
  const std::string text = format_summary(s, o);
  EXPECT_NE(text.find("one CUDA graph replay per step | 120 kernel launches per step"),
            std::string::npos)
      << text;
}

TEST(Report, UnmeasuredPhasesAreNullNotNumbers) {
  TrainSummary s = summary_with_one_step(std::numeric_limits<double>::quiet_NaN());
  s.phases_timed = false;
  s.execution_note = "forward/backward/optimizer not timed: test";
  TrainOptions o;
  const nlohmann::json j = json_report(s, o);
  EXPECT_TRUE(j["forward_ms"].is_null());
  EXPECT_TRUE(j["steps"][0]["backward_ms"].is_null());
  EXPECT_EQ(j["ms_per_step"], 2.0);
  EXPECT_EQ(j["execution_note"], s.execution_note);
  EXPECT_TRUE(j["kernel_launches_per_step"].is_null()) << "not counted on the cpu";
  EXPECT_TRUE(j["clocks"].is_null()) << "no GPU clock on the cpu";
  const std::string text = format_summary(s, o);
  EXPECT_EQ(text.find("clocks"), std::string::npos) << text;
  EXPECT_EQ(text.find("nan"), std::string::npos) << text;
  EXPECT_NE(text.find("phases not measured"), std::string::npos) << text;
}

// A CUDA run's clock over its timed steps: in the JSON as the profile's
// summary.json has it, and a line under the step time.
TEST(Report, TheClockTheStepsRanAtIsReported) {
  TrainSummary s = summary_with_one_step(0.5);
  prof::ClockReport clocks;
  clocks.samples = {{1530, 692, prof::kClockReasonPowerCap},
                    {1590, 688, prof::kClockReasonPowerCap},
                    {1980, 75, prof::kClockReasonIdle}};
  clocks.max_sm_mhz = 1980;
  clocks.power_limit_w = 700;
  s.clocks = clocks;
  TrainOptions o;
  const nlohmann::json j = json_report(s, o);
  EXPECT_EQ(j["clocks"]["samples"], 2) << "the idle sample left out: " << j["clocks"].dump();
  EXPECT_DOUBLE_EQ(j["clocks"]["sm_mhz_median"].get<double>(), 1560);
  const std::string text = format_summary(s, o);
  EXPECT_NE(text.find("\n  clocks       SM 1560 MHz median (1530-1590) of the GPU's 1980 MHz"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n               clock held down by: power cap in 100 %"), std::string::npos)
      << text;
  EXPECT_LT(text.find("  step time"), text.find("  clocks")) << text;
}

// Data parallel: the ranks line, and one rank's memory with every category
// on one line, as a single-process run prints it.
TEST(Report, DataParallelSummaryGivesTheRanksAndOneRanksMemory) {
  TrainSummary s = summary_with_one_step(0.5);
  s.ranks = 2;
  s.tokens_per_s_per_rank = 1000;
  s.parallel = "2 ranks, ZeRO-1 (AdamW state sharded) over nccl 2.28.9";
  s.peak_mb = 12.5;
  s.memory.parameters = 1000;
  s.memory.gradients = 2000;
  s.memory.optimizer = 3000;
  s.memory.activations = 4000;
  s.memory.workspaces = 5000;
  s.device_used_peak_mb = 600;
  TrainOptions o;
  const std::string text = format_summary(s, o);
  const std::string memory = "  peak memory  12.5 MB per rank (parameters " + format_bytes(1000) +
                             ", gradients " + format_bytes(2000) + ", optimizer " +
                             format_bytes(3000) + ", activations " + format_bytes(4000) +
                             ", workspaces " + format_bytes(5000) + ")\n";
  EXPECT_NE(text.find(memory), std::string::npos) << text;
  EXPECT_NE(text.find("\n  device used  600.0 MB"), std::string::npos) << text;
  EXPECT_NE(text.find("  ranks        2 (1000 tokens/s per rank) | " + s.parallel + "\n"),
            std::string::npos)
      << text;

  s.ranks = 1;
  s.parallel = "off";
  const std::string single = format_summary(s, o);
  EXPECT_NE(single.find("  peak memory  12.5 MB (parameters "), std::string::npos) << single;
  EXPECT_EQ(single.find("per rank"), std::string::npos) << single;
}

// The header shows every op's implementation and says once, with the
// reason, what fell back.
TEST(Report, TheRunHeaderShowsThePlanAndEachFallback) {
  TrainOptions o;
  o.plan = plan_for_level("v2", Precision::fp32(), DeviceCaps::cpu(), o.model, o.shape);
  const std::string cpu = format_run_header(o);
  EXPECT_NE(cpu.find("plan | qkv_gemm fused | gate_up_gemm fused | attention flash"),
            std::string::npos)
      << cpu;
  EXPECT_NE(cpu.find("fallback | execution graph -> eager: the cpu backend runs eagerly"),
            std::string::npos)
      << cpu;
  OpChoices eager = level_preset("v2");
  eager.execution = Execution::Eager;
  eager.optimizer = OptimizerImpl::Fused;
  o.plan = plan_for_choices(eager, Precision::fp32(), DeviceCaps::cpu(), o.model, o.shape);
  EXPECT_EQ(format_run_header(o).find("fallback"), std::string::npos) << format_run_header(o);
  EXPECT_EQ(json_report(TrainSummary{}, o)["plan"]["fallbacks"].size(), 0u);
}

// --json breaks the activations down by kind, summing to the activation
// memory the run reports, and gives each arena buffer's lifetime.
TEST(Report, JsonBreaksTheActivationsDownByKind) {
  TrainOptions o;
  o.model.hidden_dim = 32;
  o.model.num_layers = 2;
  o.model.num_heads = 4;
  o.model.num_kv_heads = 2;
  o.model.ffn_dim = 64;
  o.shape = {3, 16};
  for (const char* level : {"v1", "v2", "v3"}) {
    o.plan = plan_for_level(level, Precision::fp32(), DeviceCaps::cpu(), o.model, o.shape);
    const nlohmann::json a = json_report(TrainSummary{}, o)["activations"];
    std::int64_t sum = 0;
    for (const auto& [kind, bytes] : a["by_kind"].items()) sum += bytes.get<std::int64_t>();
    const std::int64_t planned = Model::estimate_memory(o.model, o.shape, o.plan).activations;
    // The kinds count the bytes the scratch over the logits shares once each.
    EXPECT_EQ(sum - a["shared_bytes"].get<std::int64_t>(), planned) << level;
    EXPECT_EQ(a["activations_bytes"].get<std::int64_t>(), planned) << level;
    const int ops = static_cast<int>(a["ops"].size());
    for (const nlohmann::json& b : a["buffers"]) {
      EXPECT_LE(0, b["first_op"].get<int>()) << b["name"];
      EXPECT_LE(b["first_op"].get<int>(), b["last_op"].get<int>()) << b["name"];
      EXPECT_LT(b["last_op"].get<int>(), ops) << b["name"];
    }
  }
  o.plan = StepPlan{};  // not resolved: nothing to trace
  EXPECT_TRUE(json_report(TrainSummary{}, o)["activations"].is_null());
}

TEST(Report, AttentionAutoShowsItsChoiceAndBothTimes) {
  TrainOptions o;
  DeviceCaps caps = DeviceCaps::cpu();
  caps.cudnn_attention = "";
  caps.times_attention = true;
  caps.cudnn_timing = AttentionTiming{0.5, 1.0};
  caps.flash_timing = AttentionTiming{0.25, 0.5};
  OpChoices ops = level_preset("v2");
  ops.attention = AttentionImpl::Auto;
  o.plan = plan_for_choices(ops, Precision::amp(DType::BF16), caps, o.model, o.shape);
  const std::string header = format_run_header(o);
  EXPECT_NE(header.find("\nattention | auto chose flash per layer: flash 0.750 ms (fwd 0.250 ms, "
                        "bwd 0.500 ms), cudnn 1.500 ms"),
            std::string::npos)
      << header;
  const nlohmann::json j = json_report(summary_with_one_step(1.0), o);
  EXPECT_EQ(j["plan"]["attention_auto"]["chosen"], "flash");
  EXPECT_DOUBLE_EQ(j["plan"]["attention_auto"]["cudnn"]["total_ms"].get<double>(), 1.5);
}

TEST(Report, WarmupLinesFollowTheLogRuleOverTheWarmupSteps) {
  TrainOptions o;
  o.warmup_steps = 25;
  o.log_every = 10;
  for (int step : {1, 10, 20, 25}) EXPECT_TRUE(should_log_warmup(step, o)) << step;
  for (int step : {2, 9, 11, 24}) EXPECT_FALSE(should_log_warmup(step, o)) << step;
  StepRecord r;
  r.step = 10;
  r.loss = 6.99641;
  r.ms = 4123.456;
  EXPECT_EQ(format_warmup_line(r, o), "warm-up 10/25 | loss 6.9964 | 4123.46 ms");
}

TEST(Report, ProgressLineCountsWarmupThenTimedStepsAndGivesTheTimeLeft) {
  TrainOptions o;
  o.warmup_steps = 5;
  o.num_steps = 50;
  // 3 of 55 done at 4 s a step: 52 steps, 208 s left.
  EXPECT_EQ(format_progress_line(3, o, 4.0), "warm-up 3/5 | 4.00 s/step | ETA 3m28s");
  EXPECT_EQ(format_progress_line(17, o, 0.0125), "step 12/50 | 12.5 ms/step | ETA 0s");
  EXPECT_EQ(format_duration(42.4), "42s");
  EXPECT_EQ(format_duration(3600 + 125), "1h02m");
  EXPECT_EQ(format_duration(-1), "0s");
}

}  // namespace
}  // namespace tinyllama
