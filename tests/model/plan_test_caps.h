#pragma once
// The device facts the plan tests resolve against: a CUDA-like device (graphs,
// the flash kernels' head_dims, programmatic launches) and a model of a
// given head_dim.
#include "model/step_plan.h"
#include "model/test_plans.h"

namespace tinyllama {

inline DeviceCaps gpu_like_caps() {
  DeviceCaps caps = graph_capable_cpu_caps();
  caps.kind = DeviceKind::Cuda;
  caps.flash_head_dims = {32, 64, 128};
  caps.no_programmatic_launch = "";  // an sm_90 device
  return caps;
}

inline ModelConfig with_head_dim(int hd) {
  ModelConfig cfg;
  cfg.num_heads = 4;
  cfg.num_kv_heads = 2;
  cfg.hidden_dim = 4 * hd;
  return cfg;
}

}  // namespace tinyllama
