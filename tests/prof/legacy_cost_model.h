#pragma once
#include "prof/cost_model.h"

namespace tinyllama::prof::legacy {
StepCost hand_step_cost(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan);
}
