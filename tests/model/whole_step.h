#pragma once
// One unscaled training step as StepRunner enqueues it: the step's scalars
// staged, then the passes, with each layer updated during the backward pass
// where the plan does that (OptimizerImpl::FusedPerLayer).
#include "model/model.h"

namespace tinyllama {

inline void run_whole_step(Model& model, const AdamWHyper& hp) {
  model.stage_step(1.0f, false, hp);
  model.forward_pass();
  model.backward_pass(/*update_layers=*/true);
  model.optimizer_pass();
}

}  // namespace tinyllama
