#include "train/numerics_check.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/rng.h"
#include "cpu/cpu_backend.h"
#include "cpu/rounding_backend.h"
#include "model/init.h"
#include "model/model.h"
#include "model/tolerance.h"
#include "train/backend_factory.h"
#include "train/loss_scaler.h"
#include "train/step_runner.h"

namespace tinyllama {
namespace {

constexpr int kSteps = 2;

// Init weights with the norm weights moved off 1, so that a norm weight read
// wrongly (or not at all) changes the result.
std::vector<double> seeded_weights(const ParamLayout& layout, std::uint64_t seed) {
  std::vector<double> w = initial_weights(layout, seed);
  Rng rng(seed + 1);
  for (const ParamSlot& s : layout.slots()) {
    if (!s.is_norm) continue;
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      w[static_cast<std::size_t>(s.offset + i)] += static_cast<float>(0.2 * rng.normal());
    }
  }
  return w;
}

std::vector<std::int32_t> seeded_rows(BatchShape shape, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> rows(static_cast<std::size_t>(shape.batch) * (shape.seq + 1));
  for (auto& t : rows)
    t = static_cast<std::int32_t>(1 + rng.below(static_cast<std::uint64_t>(vocab - 1)));
  return rows;
}

// What one step of the run under test started from and produced.
struct StepTaken {
  std::vector<std::int32_t> rows;
  std::vector<double> before, m_before, v_before;  // state before the step
  double loss = 0;
  std::vector<double> grads;  // of the mean loss (a loss scale divided out)
  std::vector<double> after;  // weights after the update
  int update = 0;             // AdamW's step count of the update
  bool skipped = false;       // fp16 overflow
};

// Loss and gradients of the mean loss at `weights` on `rows`, in float64 on
// `backend` (the exact reference, or the rounding one).
struct LossAndGrads {
  double loss = 0;
  std::vector<double> grads;
};
LossAndGrads float64_step(const NumericsCase& c, Backend& backend,
                          const std::vector<double>& weights, const std::vector<std::int32_t>& rows,
                          float loss_scale) {
  const NumericsConfig& cfg = c.config;
  const StepPlan plan =
      plan_for_level(c.level, Precision::fp64(), DeviceCaps::cpu(), cfg.model, cfg.shape);
  Model model(cfg.model, cfg.shape, plan, backend);
  model.set_params(weights);
  model.set_batch(rows);
  model.forward();
  LossAndGrads out;
  out.loss = model.loss();
  model.backward(loss_scale);
  out.grads = model.grads();
  for (double& g : out.grads) g /= loss_scale;
  return out;
}

// fp64 AdamW (the reference op) from the step's own starting state and gradients.
std::vector<double> reference_update(const StepTaken& s) {
  std::vector<double> p = s.before, g = s.grads, m = s.m_before, v = s.v_before;
  const auto n = static_cast<std::int64_t>(p.size());
  CpuBackend exact;
  AdamWHyper hp;
  hp.step = s.update;
  exact.adamw(Mat(p.data(), DType::F64, 1, n), Mat(g.data(), DType::F64, 1, n),
              Mat(m.data(), DType::F64, 1, n), Mat(v.data(), DType::F64, 1, n), hp);
  return p;
}

double slot_error(const ParamSlot& s, const std::vector<double>& actual,
                  const std::vector<double>& ref) {
  const auto at = static_cast<std::size_t>(s.offset);
  return max_rel_error(actual.data() + at, ref.data() + at, static_cast<std::size_t>(s.numel()));
}

double loss_error(double actual, double ref) {
  return std::isfinite(actual) ? std::abs(actual - ref) / std::abs(ref) : INFINITY;
}

void judge_step(const NumericsCase& c, const ParamLayout& layout, int step, const StepTaken& s,
                std::vector<ErrorCheck>& checks) {
  const std::vector<ErrorCheck> loss_grads =
      compare_with_reference(c, layout, step, s.before, s.rows, s.loss, s.grads);
  checks.insert(checks.end(), loss_grads.begin(), loss_grads.end());
  if (s.skipped) {
    checks.push_back({"adamw (fp16 overflow skipped the update)", step, INFINITY, kAdamwTolerance});
    return;
  }
  const std::vector<double> expected = reference_update(s);
  double worst = 0;
  for (const ParamSlot& slot : layout.slots()) {
    const auto at = static_cast<std::size_t>(slot.offset);
    worst = std::max(
        worst, adamw_step_error(s.after.data() + at, expected.data() + at, s.before.data() + at,
                                static_cast<std::size_t>(slot.numel())));
  }
  checks.push_back({"adamw", step, worst, kAdamwTolerance});
}

}  // namespace

std::vector<ErrorCheck> compare_with_reference(const NumericsCase& c, const ParamLayout& layout,
                                               int step, const std::vector<double>& before,
                                               const std::vector<std::int32_t>& rows, double loss,
                                               const std::vector<double>& grads) {
  CpuBackend exact;
  const LossAndGrads ref = float64_step(c, exact, before, rows, 1.0f);
  const bool mixed = c.precision.mixed();
  LossAndGrads base;
  if (mixed) {
    // The baseline: the same step with every stored value rounded to the
    // compute dtype, fp16 at the loss scale the trainer starts from.
    RoundingBackend rounding(c.precision.compute);
    std::vector<double> rounded = before;
    round_to_dtype(rounded, c.precision.compute);
    const float scale = c.precision.compute == DType::F16 ? 65536.0f : 1.0f;
    base = float64_step(c, rounding, rounded, rows, scale);
  }
  auto check = [&](std::string quantity, double error, double baseline_error) {
    ErrorCheck e{std::move(quantity), step, error, kFp32Tolerance, -1};
    if (mixed) {
      e.baseline = baseline_error;
      e.limit = amp_limit(baseline_error, c.precision.compute);
    }
    return e;
  };
  std::vector<ErrorCheck> checks;
  checks.push_back(
      check("loss", loss_error(loss, ref.loss), mixed ? loss_error(base.loss, ref.loss) : 0.0));
  // Gradients per tensor, reported per kind of tensor: the layer whose
  // error is nearest its limit.
  for (const ParamSlot& slot : layout.slots()) {
    ErrorCheck e = check("grad " + param_group(slot.name), slot_error(slot, grads, ref.grads),
                         mixed ? slot_error(slot, base.grads, ref.grads) : 0.0);
    auto same = std::find_if(checks.begin(), checks.end(),
                             [&](const ErrorCheck& g) { return g.quantity == e.quantity; });
    if (same == checks.end()) {
      checks.push_back(e);
    } else if (!(same->error / same->limit >= e.error / e.limit)) {
      *same = e;
    }
  }
  return checks;
}

std::vector<NumericsConfig> validation_configs() {
  auto make = [](std::string name, int kv_heads, std::uint64_t seed) {
    ModelConfig m;
    m.vocab_size = 101;
    m.hidden_dim = 192;  // head_dim 32
    m.num_layers = 2;
    m.num_heads = 6;
    m.num_kv_heads = kv_heads;
    m.ffn_dim = 200;
    return NumericsConfig{std::move(name), m, BatchShape{3, 37}, seed};
  };
  return {make("mha", 6, 1234), make("gqa", 3, 77), make("mqa", 1, 9001)};
}

std::string precision_label(Precision p) {
  return std::string(dtype_name(p.compute));
}

bool NumericsResult::pass() const {
  return std::all_of(checks.begin(), checks.end(), [](const ErrorCheck& e) { return e.pass(); });
}

const ErrorCheck* NumericsResult::worst(const std::string& prefix) const {
  const ErrorCheck* out = nullptr;
  for (const ErrorCheck& e : checks) {
    if (e.quantity.rfind(prefix, 0) != 0) continue;
    if (out == nullptr || !(out->error / out->limit >= e.error / e.limit)) out = &e;
  }
  return out;
}

NumericsResult check_numerics(const NumericsCase& c) {
  const std::unique_ptr<Backend> backend = make_backend(c.device, c.precision);
  return check_numerics(c, *backend);
}

NumericsResult check_numerics(const NumericsCase& c, Backend& backend) {
  const NumericsConfig& cfg = c.config;
  cfg.model.validate();
  NumericsResult result;
  result.c = c;
  PlanRequest request;
  request.level = c.level;
  request.ops = level_preset(c.level);
  request.precision = c.precision;
  request.whole_gradient_reader = "validate compares each step's gradients with the reference";
  const StepPlan plan = resolve_plan(
      request, run_caps(backend.caps(), request, cfg.model, cfg.shape), cfg.model, cfg.shape);
  result.plan = plan.describe();
  Model model(cfg.model, cfg.shape, plan, backend);
  model.set_params(seeded_weights(model.layout(), cfg.seed));
  LossScaler scaler(plan.loss_scaling == LossScaling::Dynamic);
  StepRunner runner(model, scaler, AdamWHyper{});
  for (int step = 1; step <= kSteps; ++step) {
    StepTaken s;
    s.rows = seeded_rows(cfg.shape, cfg.model.vocab_size, cfg.seed + 100 + step);
    s.before = model.params();
    s.m_before = model.adam_m();
    s.v_before = model.adam_v();
    const StepRecord rec = runner.run(s.rows);
    s.loss = rec.loss;
    s.skipped = rec.skipped;
    s.grads = model.grads();
    for (double& g : s.grads) g /= rec.loss_scale;
    s.after = model.params();
    s.update = runner.applied_updates();
    judge_step(c, model.layout(), step, s, result.checks);
  }
  result.captured = runner.replaying();
  return result;
}

}  // namespace tinyllama
