#pragma once
// The profile summary's inputs for a two-layer model on an H100 (v2 plan,
// captured, B2 S8, one 2 ms step): what the summary tests vary from.
#include "model/test_plans.h"
#include "prof/profile_summary.h"

namespace tinyllama::prof {

inline ProfileInputs tiny_h100_inputs(Precision precision) {
  ProfileInputs in;
  in.device = "NVIDIA H100 80GB HBM3";
  in.backend = "cuda";
  in.model.num_layers = 2;
  in.shape = BatchShape{2, 8};
  in.plan = graph_plan(level_preset("v2"), precision, in.model, in.shape);
  in.cost = step_cost(in.model, in.shape, in.plan);
  in.times.profiled_ms = {2.0};
  in.times.run_ms_per_step = 2.0;
  return in;
}

}  // namespace tinyllama::prof
