#pragma once
// The update recipe's work (model/step_plan.h UpdateRecipe) on top of one
// batch's step cost (prof/cost_model.h): K micro-batches run every forward
// and backward op K times (the paths sum them), their gradients are summed
// once per micro-batch (Model::accumulate_gradients: a copy, then a
// read-add-write each), and the gradient norm reads the gradient once more
// before the update.
#include "model/config.h"
#include "model/step_plan.h"
#include "prof/cost_model.h"

namespace tinyllama::prof {

// Adds them to `sc`, one batch's ops in pass order; nothing for the
// workshop's recipe (one batch, no norm).
void add_update_recipe_cost(StepCost& sc, const ModelConfig& cfg, const StepPlan& plan);

}  // namespace tinyllama::prof
