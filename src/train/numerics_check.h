#pragma once
// `tinyllama validate`'s measurement: a level at a precision on a device,
// two training steps from seeded weights and batches (the first eager; the
// second a captured graph's first replay where the plan captures), each held
// to the float64 CPU reference on the same weights and batch -- the loss,
// every parameter's gradient, and the weights after the AdamW update --
// with the tolerances of model/tolerance.h.
#include <cstdint>
#include <string>
#include <vector>

#include "model/backend.h"
#include "model/config.h"
#include "model/param_layout.h"
#include "model/step_plan.h"

namespace tinyllama {

// A seeded model and batch shape to validate on.
struct NumericsConfig {
  std::string name;  // "mha", "gqa", "mqa"
  ModelConfig model;
  BatchShape shape;
  std::uint64_t seed = 0;
};

// The configs `validate` runs: K = H, H/2 and 1 at a small model of awkward
// sizes (prime vocabulary and sequence, odd batch, F not a multiple of 64)
// whose head_dim 32 the CUDA flash kernels take.
std::vector<NumericsConfig> validation_configs();

struct NumericsCase {
  NumericsConfig config;
  std::string level;
  DeviceKind device = DeviceKind::Cpu;
  Precision precision = Precision::fp32();
};

// One quantity against its limit. error and limit are in the limit's metric
// (model/tolerance.h): max_rel_error for losses and gradients,
// adamw_step_error for the update.
struct ErrorCheck {
  std::string quantity;  // "loss", "grad wqkv", "adamw"
  int step = 0;          // 1 or 2
  double error = 0;
  double limit = 0;
  double baseline = -1;  // mixed precision: the rounded reference's error (else -1)
  bool pass() const { return error <= limit; }
};

struct NumericsResult {
  NumericsCase c;
  std::string plan;       // the resolved plan, one line
  bool captured = false;  // step 2 was a graph replay
  std::vector<ErrorCheck> checks;
  bool pass() const;
  // The check with the largest error / limit among those whose quantity
  // starts with `prefix` ("loss", "grad", "adamw"); null if none.
  const ErrorCheck* worst(const std::string& prefix) const;
};

// Runs the case on a backend made for its device and precision. Throws
// RuntimeFailure if the device cannot run it.
NumericsResult check_numerics(const NumericsCase& c);
// The same on a backend of the caller's (tests hand it a broken one).
NumericsResult check_numerics(const NumericsCase& c, Backend& backend);

// The loss and gradients of one step of a run (the mean loss's gradients,
// any loss scale divided out) from weights `before` on `rows`, against the
// float64 reference of the case's level on the same weights and batch: one
// check for the loss, one per kind of parameter (the layer nearest its
// limit). The case's config, level and precision say what ran.
std::vector<ErrorCheck> compare_with_reference(const NumericsCase& c, const ParamLayout& layout,
                                               int step, const std::vector<double>& before,
                                               const std::vector<std::int32_t>& rows, double loss,
                                               const std::vector<double>& grads);

// "float32", "bfloat16", "float16": the name a precision is reported by.
std::string precision_label(Precision p);

}  // namespace tinyllama
