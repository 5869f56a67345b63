// The host side of whole-step graphs, on the CPU: StepRunner's capture
// policy, eager fallback and launch counting, and -- through a backend whose
// "graphs" replay recorded closures (fake_graph_backend.h) -- that replayed
// steps read each step's loss scale and AdamW step count instead of the
// values in force at capture, bit for bit like the eager run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <vector>

#include "core/rng.h"
#include "cpu/cpu_backend.h"
#include "fake_graph_backend.h"
#include "model/init.h"
#include "model/model.h"
#include "model/test_plans.h"
#include "train/step_runner.h"

namespace tinyllama {
namespace {

using test::FakeGraphBackend;

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 29;
  c.hidden_dim = 24;  // head_dim 4
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.ffn_dim = 20;
  return c;
}

constexpr BatchShape kShape{3, 7};

std::vector<std::int32_t> batch(int step) {
  Rng rng(100 + static_cast<std::uint64_t>(step));
  std::vector<std::int32_t> rows(static_cast<std::size_t>(kShape.batch) * (kShape.seq + 1));
  for (auto& t : rows) t = static_cast<std::int32_t>(1 + rng.below(28));
  return rows;
}

struct RunResult {
  std::vector<StepRecord> steps;
  std::vector<double> params;
};

// The level's plan on the backend, captured or eager (the backend's caps
// decide whether a capture can happen: the CPU backend falls back to eager).
StepPlan plan_on(const Backend& backend, const std::string& level, bool graphs) {
  OpChoices ops = level_preset(level);
  ops.execution = graphs ? Execution::Graph : Execution::Eager;
  return test_plan(ops, Precision::fp32(), backend, small_config(), kShape);
}

// `steps` steps from the same weights and batches; fp16-style loss scaling
// on an fp32 model when scaler_initial > 0. With most_in_flight, as the
// trainer runs them: each step launched as soon as the runner allows, the
// oldest finished only when it must be, and the most steps in flight noted.
RunResult train_steps(Backend& backend, bool graphs, int steps, double scaler_initial,
                      const std::vector<double>& weights, int growth_interval = 2,
                      int* most_in_flight = nullptr) {
  Model model(small_config(), kShape, plan_on(backend, "v2", graphs), backend);
  model.set_params(weights);
  LossScaler scaler(scaler_initial > 0, scaler_initial > 0 ? scaler_initial : 1.0, growth_interval);
  AdamWHyper hp;
  hp.lr = 1e-2f;
  StepRunner runner(model, scaler, hp);
  RunResult out;
  for (int i = 0; i < steps; ++i) {
    if (most_in_flight == nullptr) {
      out.steps.push_back(runner.run(batch(i)));
      continue;
    }
    while (!runner.can_launch()) out.steps.push_back(runner.finish());
    runner.launch(batch(i));
    *most_in_flight = std::max(*most_in_flight, runner.in_flight());
  }
  while (runner.in_flight() > 0) out.steps.push_back(runner.finish());
  out.params = model.params();
  EXPECT_EQ(runner.replaying(), graphs && backend.supports_graphs() && steps > 1);
  return out;
}

std::vector<double> weights() {
  return initial_weights(ParamLayout(small_config()), 5);
}

void expect_same_run(const RunResult& a, const RunResult& b) {
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (std::size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].loss, b.steps[i].loss) << "step " << i + 1;
    EXPECT_EQ(a.steps[i].skipped, b.steps[i].skipped) << "step " << i + 1;
    EXPECT_EQ(a.steps[i].loss_scale, b.steps[i].loss_scale) << "step " << i + 1;
  }
  EXPECT_EQ(a.params, b.params) << "parameters after the run differ";
}

TEST(StepRunner, ReplayedStepsMatchEagerStepsBitForBit) {
  const std::vector<double> w = weights();
  CpuBackend cpu;
  const RunResult eager = train_steps(cpu, false, 6, 1024.0, w);
  FakeGraphBackend fake;
  const RunResult graphed = train_steps(fake, true, 6, 1024.0, w);
  // Step 1 eager, step 2 captured (once per slot) and replayed, steps 3-6
  // replayed.
  EXPECT_EQ(fake.captures, kGraphSlots);
  EXPECT_EQ(fake.replays, 5);
  // The scale grows every 2 clean steps and AdamW's bias correction changes
  // every step: a value baked into the capture would show here.
  EXPECT_NE(eager.steps.front().loss_scale, eager.steps.back().loss_scale);
  expect_same_run(eager, graphed);
}

// The update recipe through captured steps: two micro-batches per step (both
// passes in one graph), clipping whose coefficient is computed on the device
// each step, the matrices-only decay groups, a learning rate that changes
// every step, and two steps in flight. A value baked into the capture (the
// first step's lr or clip coefficient) or a micro-batch's tokens read from
// the wrong block would show against the eager steps.
TEST(StepRunner, AccumulatingClippedStepsReplayLikeEagerSteps) {
  const std::vector<double> w = weights();
  UpdateRecipe recipe;
  recipe.accumulation = 2;
  recipe.clip_norm = 0.05;
  recipe.decay_matrices_only = true;
  auto run = [&](Backend& backend, bool graphs) {
    OpChoices ops = level_preset("v2");
    ops.execution = graphs ? Execution::Graph : Execution::Eager;
    PlanRequest request;
    request.level = "custom";
    request.ops = with_full_gradients(ops);
    request.precision = Precision::fp32();
    request.update = recipe;
    Model model(small_config(), kShape,
                resolve_plan(request, backend.caps(), small_config(), kShape), backend);
    model.set_params(w);
    LossScaler scaler(false);
    AdamWHyper hp;
    hp.weight_decay = 0.1f;
    StepRunner runner(model, scaler, hp);
    RunResult out;
    std::vector<double> norms;
    for (int i = 0; i < 6; ++i) {
      while (!runner.can_launch()) out.steps.push_back(runner.finish());
      std::vector<std::int32_t> rows = batch(2 * i);
      const std::vector<std::int32_t> second = batch(2 * i + 1);
      rows.insert(rows.end(), second.begin(), second.end());
      runner.set_learning_rate(1e-2 / (1 + i));
      runner.launch(rows);
    }
    while (runner.in_flight() > 0) out.steps.push_back(runner.finish());
    out.params = model.params();
    return out;
  };
  CpuBackend cpu;
  const RunResult eager = run(cpu, false);
  FakeGraphBackend fake;
  const RunResult graphed = run(fake, true);
  EXPECT_GT(fake.replays, 0);
  expect_same_run(eager, graphed);
  for (std::size_t i = 0; i < eager.steps.size(); ++i) {
    EXPECT_EQ(eager.steps[i].grad_norm, graphed.steps[i].grad_norm) << "step " << i + 1;
    EXPECT_EQ(eager.steps[i].lr, graphed.steps[i].lr) << "step " << i + 1;
    EXPECT_GT(eager.steps[i].grad_norm, recipe.clip_norm) << "every step clips";
  }
  EXPECT_NE(eager.steps.front().lr, eager.steps.back().lr);
}

// Launching step n+1 before step n's loss is read: through the fake graphs,
// which run each replay at once, step n+1 has overwritten the device's
// losses (and the shared timer's marks, were they shared) before step n is
// finished -- so this passes only if each step reads back its own copy and
// times itself with its slot's marks, and AdamW's step count counts the
// updates still in flight.
TEST(StepRunner, LaunchingAheadTrainsLikeOneStepAtATime) {
  const std::vector<double> w = weights();
  CpuBackend cpu;
  const RunResult one_at_a_time = train_steps(cpu, false, 7, 0, w);
  for (const bool graphs : {false, true}) {
    FakeGraphBackend fake;
    int most = 0;
    const RunResult ahead = train_steps(fake, graphs, 7, 0, w, 2, &most);
    EXPECT_EQ(most, kGraphSlots) << "steps never overlapped";
    EXPECT_EQ(fake.captures, graphs ? kGraphSlots : 0);
    EXPECT_EQ(fake.replays, graphs ? 6 : 0);
    expect_same_run(one_at_a_time, ahead);
    for (const StepRecord& r : ahead.steps) {
      EXPECT_TRUE(r.forward_ms >= 0 && r.backward_ms >= 0 && r.optimizer_ms >= 0 && r.ms >= 0)
          << "a step timed with marks that were not its own";
    }
  }
}

TEST(StepRunner, LossScalingKeepsOneStepInFlight) {
  CpuBackend cpu;
  Model model(small_config(), kShape, plan_on(cpu, "v2", false), cpu);
  model.set_params(weights());
  LossScaler scaler(true, 1024.0);
  StepRunner runner(model, scaler, AdamWHyper{});
  EXPECT_EQ(runner.max_in_flight(), 1);
  EXPECT_THROW(runner.finish(), std::logic_error);
  runner.launch(batch(0));
  EXPECT_FALSE(runner.can_launch()) << "the next scale depends on this step's overflow";
  EXPECT_THROW(runner.launch(batch(1)), std::logic_error);
  EXPECT_THROW(runner.run(batch(1)), std::logic_error);
  EXPECT_TRUE(std::isfinite(runner.finish().loss));
  EXPECT_TRUE(runner.can_launch());
}

TEST(StepRunner, TheCaptureWaitsForAnIdleDevice) {
  FakeGraphBackend fake;
  Model model(small_config(), kShape, plan_on(fake, "v2", true), fake);
  model.set_params(weights());
  LossScaler scaler(false);
  StepRunner runner(model, scaler, AdamWHyper{});
  EXPECT_EQ(runner.max_in_flight(), kGraphSlots);
  runner.launch(batch(0));  // eager; the next one captures
  EXPECT_FALSE(runner.can_launch());
  runner.finish();
  EXPECT_TRUE(runner.can_launch());
  runner.launch(batch(1));
  EXPECT_TRUE(runner.replaying());
  EXPECT_TRUE(runner.can_launch());
  EXPECT_THROW(runner.count_launches(), std::logic_error);
}

TEST(StepRunner, SkippedUpdatesUnderReplayDoNotAdvanceTheStepCount) {
  const std::vector<double> w = weights();
  // The largest gradient at loss scale 1 sets a loss scale that overflows
  // fp32 for the first few steps and not after a few halvings.
  double max_grad = 0;
  {
    CpuBackend cpu;
    Model m(small_config(), kShape, plan_on(cpu, "v2", false), cpu);
    m.set_params(w);
    m.set_batch(batch(0));
    m.forward();
    m.backward();
    for (double g : m.grads()) max_grad = std::max(max_grad, std::abs(g));
  }
  const double initial = std::ldexp(1.0, static_cast<int>(std::log2(FLT_MAX / max_grad)) + 3);

  CpuBackend cpu;
  const RunResult eager = train_steps(cpu, false, 9, initial, w, 1000);
  FakeGraphBackend fake;
  const RunResult graphed = train_steps(fake, true, 9, initial, w, 1000);
  expect_same_run(eager, graphed);

  int skipped_replays = 0;
  int applied = 0;
  for (std::size_t i = 0; i < graphed.steps.size(); ++i) {
    const StepRecord& r = graphed.steps[i];
    if (i > 0 && r.skipped) ++skipped_replays;
    if (!r.skipped) ++applied;
    if (i > 0 && graphed.steps[i - 1].skipped) {
      EXPECT_EQ(r.loss_scale, graphed.steps[i - 1].loss_scale / 2) << "the scale halves";
    }
  }
  EXPECT_GE(skipped_replays, 1) << "no replayed step overflowed: the test lost its point";
  EXPECT_GE(applied, 1) << "every step overflowed: the test lost its point";
}

// `steps` steps of v2's captured plan on `fake` from weights `w`, with
// fp16-style loss scaling when scaler_initial > 0 (as train_steps); `check`
// sees the runner after them.
RunResult graph_plan_steps(FakeGraphBackend& fake, const std::vector<double>& w, int steps,
                           double scaler_initial,
                           const std::function<void(const StepRunner&)>& check) {
  Model model(small_config(), kShape, plan_on(fake, "v2", true), fake);
  model.set_params(w);
  LossScaler scaler(scaler_initial > 0, scaler_initial > 0 ? scaler_initial : 1.0, 2);
  AdamWHyper hp;
  hp.lr = 1e-2f;
  StepRunner runner(model, scaler, hp);
  RunResult out;
  for (int i = 0; i < steps; ++i) out.steps.push_back(runner.run(batch(i)));
  out.params = model.params();
  check(runner);
  return out;
}

TEST(StepRunner, FailedInstantiationFallsBackToEagerSteps) {
  const std::vector<double> w = weights();
  CpuBackend cpu;
  const RunResult eager = train_steps(cpu, false, 4, 0, w);

  FakeGraphBackend fake;
  fake.fail_instantiate = true;
  const RunResult graphed = graph_plan_steps(fake, w, 4, 0, [](const StepRunner& runner) {
    EXPECT_TRUE(runner.capture_failed());
    EXPECT_FALSE(runner.replaying());
    EXPECT_NE(runner.note().find("capture failed"), std::string::npos) << runner.note();
    EXPECT_NE(runner.note().find("instantiation refused"), std::string::npos) << runner.note();
  });
  EXPECT_EQ(fake.replays, 0);
  expect_same_run(eager, graphed);
}

TEST(StepRunner, AnOpThatCannotBeCapturedFallsBackToEagerSteps) {
  const std::vector<double> w = weights();
  CpuBackend cpu;
  const RunResult eager = train_steps(cpu, false, 3, 1024.0, w);

  FakeGraphBackend fake;
  fake.fail_op_during_capture = true;
  const RunResult graphed = graph_plan_steps(fake, w, 3, 1024.0, [](const StepRunner& runner) {
    EXPECT_TRUE(runner.capture_failed());
    EXPECT_FALSE(runner.launches().has_value());
  });
  expect_same_run(eager, graphed);
}

// TINYLLAMA_GRAPH_CAPTURE=0: a captured plan's steps run eagerly, never
// captured, and the note says so.
TEST(StepRunner, CaptureSkippedByTheEnvironmentRunsEagerly) {
  const std::vector<double> w = weights();
  CpuBackend cpu;
  const RunResult eager = train_steps(cpu, false, 4, 0, w);

  // Read when the runner is made.
  ::setenv("TINYLLAMA_GRAPH_CAPTURE", "0", 1);
  FakeGraphBackend fake;
  const RunResult skipped = graph_plan_steps(fake, w, 4, 0, [](const StepRunner& runner) {
    EXPECT_FALSE(runner.replaying());
    EXPECT_FALSE(runner.capture_failed());
    EXPECT_NE(runner.note().find("TINYLLAMA_GRAPH_CAPTURE=0"), std::string::npos) << runner.note();
    EXPECT_EQ(runner.note().find("no graph captured"), std::string::npos) << runner.note();
  });
  ::unsetenv("TINYLLAMA_GRAPH_CAPTURE");
  EXPECT_EQ(fake.replays, 0);
  expect_same_run(eager, skipped);
}

TEST(StepRunner, GraphStepsCountTheirLaunchesAndTimeTheirPhases) {
  FakeGraphBackend fake;
  Model model(small_config(), kShape, plan_on(fake, "v2", true), fake);
  model.set_params(weights());
  LossScaler scaler(true);  // fp16-style: the backward pass zeroes and scans the overflow flag
  AdamWHyper hp;
  StepRunner runner(model, scaler, hp);
  EXPECT_FALSE(runner.launches().has_value());
  for (int i = 0; i < 3; ++i) {
    const StepRecord r = runner.run(batch(i));
    EXPECT_TRUE(std::isfinite(r.forward_ms) && r.forward_ms >= 0) << r.forward_ms;
    EXPECT_TRUE(std::isfinite(r.backward_ms) && r.backward_ms >= 0) << r.backward_ms;
    EXPECT_TRUE(std::isfinite(r.optimizer_ms) && r.optimizer_ms >= 0) << r.optimizer_ms;
    EXPECT_GE(r.ms, r.forward_ms);
  }
  ASSERT_TRUE(runner.launches().has_value());
  const GraphStats& g = *runner.launches();
  EXPECT_GT(g.kernels, 2 * small_config().num_layers * 10);  // every op of every layer
  EXPECT_EQ(g.memsets, 1);                                   // the overflow flag
  EXPECT_EQ(g.other, 2);  // the forward and backward timing marks
  EXPECT_TRUE(runner.phases_timed());
  EXPECT_EQ(runner.note(), "");
}

TEST(StepRunner, EagerRunsCountLaunchesWithoutRunningTheCapture) {
  FakeGraphBackend fake;
  Model model(small_config(), kShape, plan_on(fake, "v1", false), fake);
  model.set_params(weights());
  LossScaler scaler(false);
  AdamWHyper hp;
  StepRunner runner(model, scaler, hp);
  for (int i = 0; i < 2; ++i) runner.run(batch(i));
  const std::vector<double> before = model.params();
  runner.count_launches();
  ASSERT_TRUE(runner.launches().has_value());
  EXPECT_GT(runner.launches()->kernels, 0);
  EXPECT_EQ(runner.launches()->memsets, 0);  // no overflow scan without loss scaling
  EXPECT_EQ(model.params(), before) << "counting must not run the step";
  EXPECT_EQ(fake.replays, 0);
  EXPECT_FALSE(runner.replaying());
}

TEST(StepRunner, AnUncountableStepSaysWhy) {
  FakeGraphBackend fake;
  Model model(small_config(), kShape, plan_on(fake, "v1", false), fake);
  model.set_params(weights());
  LossScaler scaler(false);
  StepRunner runner(model, scaler, AdamWHyper{});
  runner.run(batch(0));
  fake.fail_op_during_capture = true;
  runner.count_launches();
  EXPECT_FALSE(runner.launches().has_value());
  EXPECT_NE(runner.note().find("kernel launches not counted: fake: op not capturable"),
            std::string::npos)
      << runner.note();
}

TEST(StepRunner, OnTheCpuBackendAGraphPlanFallsBackToEager) {
  const std::vector<double> w = weights();
  CpuBackend a;
  CpuBackend b;
  expect_same_run(train_steps(a, false, 3, 0, w), train_steps(b, true, 3, 0, w));

  CpuBackend cpu;
  Model model(small_config(), kShape, plan_on(cpu, "v2", true), cpu);
  model.set_params(w);
  LossScaler scaler(false);
  StepRunner runner(model, scaler, AdamWHyper{});
  for (int i = 0; i < 2; ++i) runner.run(batch(i));
  runner.count_launches();
  EXPECT_FALSE(runner.replaying());
  EXPECT_FALSE(runner.launches().has_value());
  EXPECT_EQ(runner.note(), "") << "the run header says it once; no per-run note";
  const StepPlan plan = plan_on(cpu, "v2", true);
  EXPECT_FALSE(plan.captured());
  ASSERT_FALSE(plan.fallbacks.empty());
  EXPECT_EQ(plan.fallbacks.front().op, "execution");
}

}  // namespace
}  // namespace tinyllama
