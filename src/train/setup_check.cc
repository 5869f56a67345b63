#include "train/setup_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "io/hf_weights.h"
#include "model/init.h"
#include "model/model.h"
#include "train/backend_factory.h"
#include "train/loss_scaler.h"
#include "train/numerics_check.h"
#include "train/run_data.h"
#include "train/step_runner.h"

namespace tinyllama {
namespace {

// Parameters x tokens above which the float64 reference loops of step 1
// would take more than about a second on one core (6 flops per pair, at a
// few hundred MFLOP/s): the comparison is then left to `validate`.
constexpr double kReferenceBudget = 1e8;

std::string printf_string(const char* format, double a, double b, double c) {
  char line[256];
  std::snprintf(line, sizeof line, format, a, b, c);
  return line;
}

bool all_finite(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

}  // namespace

double init_loss_limit(int vocab, int hidden_dim, std::int64_t tokens) {
  const double variance = hidden_dim * kInitStddev * kInitStddev;
  return std::log(static_cast<double>(vocab)) + variance +
         3.0 * std::sqrt(variance) / std::sqrt(static_cast<double>(tokens));
}

TrainOptions setup_check_options(TrainOptions opts) {
  opts.shape.batch = std::min(opts.shape.batch, kSetupBatch);
  opts.warmup_steps = 0;
  opts.num_steps = kSetupSteps;
  return opts;
}

bool SetupCheck::pass() const {
  return first_failure().empty();
}

std::string SetupCheck::first_failure() const {
  for (const Item& i : items) {
    if (!i.pass) return i.what;
  }
  return "";
}

SetupCheck check_setup(const TrainOptions& opts,
                       const std::function<void(const SetupCheck::Item&)>& on_item) {
  const StepPlan& plan = opts.plan;
  SetupCheck out;
  auto found = [&](std::string what, bool pass) {
    out.items.push_back({std::move(what), pass});
    if (on_item) on_item(out.items.back());
  };
  RunData data(opts);
  std::unique_ptr<Backend> backend = make_backend(plan.device, plan.precision);
  Model model(opts.model, opts.shape, plan, *backend);
  const double init_stddev = opts.faults.broken_init ? 1.0 : kInitStddev;
  model.set_params(opts.init_from.empty() ? initial_weights(model.layout(), opts.seed, init_stddev)
                                          : load_hf_weights(opts.init_from, model.layout()));
  LossScaler scaler(plan.loss_scaling == LossScaling::Dynamic);
  StepRunner runner(model, scaler, adamw_hyper(opts));

  for (int step = 1; step <= opts.num_steps; ++step) {
    const std::vector<double> before = step == 1 ? model.params() : std::vector<double>();
    const std::vector<std::int32_t> rows = data.train().next_batch(opts.shape.batch);
    const StepRecord rec = runner.run(rows);
    out.losses.push_back(rec.loss);
    if (!std::isfinite(rec.loss)) {
      found("step " + std::to_string(step) + " loss is not finite", false);
      return out;
    }
    if (step > 1) continue;
    const double limit =
        init_loss_limit(opts.model.vocab_size, opts.model.hidden_dim, opts.shape.tokens());
    if (opts.init_from.empty()) {
      found(printf_string("step 1 loss %.4f (ln(vocab) %.4f; the N(0, 0.02) init allows up to "
                          "%.4f)",
                          rec.loss, std::log(static_cast<double>(opts.model.vocab_size)), limit),
            rec.loss <= limit);
    }
    std::vector<double> grads = model.grads();
    for (double& g : grads) g /= rec.loss_scale;
    found(rec.skipped ? "step 1 gradients overflowed float16 at the first loss scale (skipped, "
                        "as loss scaling does)"
                      : "step 1 gradients finite",
          rec.skipped || all_finite(grads));
    const double cost = static_cast<double>(model.layout().total()) * opts.shape.tokens();
    if (rec.skipped || cost > kReferenceBudget) {
      found(rec.skipped ? std::string("step 1 against the float64 reference: skipped (no update)")
                        : "step 1 against the float64 reference: skipped at this size (the "
                          "float64 loops would be slow; `tinyllama validate` checks the levels "
                          "on small configs)",
            true);
      continue;
    }
    const NumericsCase c{
        {"setup", opts.model, opts.shape, opts.seed}, plan.level, plan.device, plan.precision};
    const std::vector<ErrorCheck> checks =
        compare_with_reference(c, model.layout(), 1, before, rows, rec.loss, grads);
    const ErrorCheck* worst = nullptr;
    for (const ErrorCheck& e : checks) {
      if (worst == nullptr || !(worst->error / worst->limit >= e.error / e.limit)) worst = &e;
    }
    found(printf_string("step 1 against the float64 reference: worst %.2e (limit %.2e)",
                        worst->error, worst->limit, 0) +
              " in " + worst->quantity,
          worst->pass());
  }
  const double first = out.losses.front();
  const double last = out.losses.back();
  const double limit =
      init_loss_limit(opts.model.vocab_size, opts.model.hidden_dim, opts.shape.tokens());
  found(printf_string("loss %.4f at step 1 -> %.4f at step %.0f: ", first, last,
                      static_cast<double>(out.losses.size())) +
            (last <= first   ? "falling"
             : last <= limit ? "not falling, still near ln(vocab)"
                             : "rising"),
        last <= first || last <= limit);
  return out;
}

}  // namespace tinyllama
