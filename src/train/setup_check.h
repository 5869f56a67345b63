#pragma once
// `train --validate-setup`: the workshop's quick check of a setup before a
// long run. A few steps of the chosen model, level, precision and device at
// a small batch, each judged: the first loss near ln(vocab) (what the
// N(0, 0.02) init gives), the losses finite and not rising, the gradients
// finite, and -- where the float64 reference loops are cheap at this size --
// step 1's loss and gradients against them at the precision's tolerance
// (train/numerics_check.h).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/options.h"

namespace tinyllama {

// The steps and the largest batch the check runs (a usage of the options
// before resolve_run: setup_check_options).
inline constexpr int kSetupSteps = 5;
inline constexpr int kSetupBatch = 2;

// opts with the check's steps and batch (no warm-up, at most kSetupBatch
// rows), to resolve (train/run_setup.h) and hand to check_setup.
TrainOptions setup_check_options(TrainOptions opts);

struct SetupCheck {
  struct Item {
    std::string what;  // "step 1 loss 6.9102 (ln(vocab) 6.9078, the init allows up to 6.95)"
    bool pass = true;
  };
  std::vector<Item> items;
  std::vector<double> losses;
  bool pass() const;
  std::string first_failure() const;  // "" when it passed
};

// Runs the check with a resolved plan (resolve_run). `on_item` receives each
// finding as it is made. Throws UsageError / RuntimeFailure as train() does.
SetupCheck check_setup(const TrainOptions& opts,
                       const std::function<void(const SetupCheck::Item&)>& on_item);

// The step-1 loss the init allows: ln(vocab) plus twice the expected excess
// of N(0, 0.02) weights (logits of variance D * 0.02^2 add half of it), plus
// three standard errors of a mean over `tokens` positions.
double init_loss_limit(int vocab, int hidden_dim, std::int64_t tokens);

}  // namespace tinyllama
