#pragma once
// The values of a training step that the host changes from one step to the
// next: AdamW's step count and learning rate (with the bias corrections they
// imply) and the fp16 loss scale. Ops read them by pointer, when they run,
// from a copy in the backend's memory that the host refreshes with a
// stream-ordered upload before each step. A whole step captured once as a
// CUDA graph therefore replays with each step's own values instead of the
// ones in force at capture; eager steps read the same copy, so both paths
// compute bit-identical results.
#include <cstdint>
#include <type_traits>

namespace tinyllama {

struct AdamWHyper;

struct StepScalars {
  // Sources, kept exactly as the host had them, so the CPU backend can
  // rebuild the AdamWHyper it was given and compute as it always has.
  double lr = 3e-4;
  double grad_scale = 1.0;  // what AdamW divides out of the gradients
  std::int32_t step = 1;    // 1-based AdamW update count

  // Cross-entropy backward's factor on softmax - onehot: loss_scale / (B*S),
  // rounded to float on the host as the eager path always did.
  float ce_grad_scale = 1.0f;

  // Derived on the host in double, once per step, for the CUDA kernels.
  double decay = 1.0;       // 1 - lr * weight_decay
  double step_size = 0.0;   // lr / (1 - beta1^step)
  double bias2_sqrt = 1.0;  // sqrt(1 - beta2^step)
  double unscale = 1.0;     // 1 / grad_scale

  // Gradient clipping's coefficient (Backend::clip_by_norm writes it on the
  // device during the step); 1 when nothing clips. The updates multiply it
  // into unscale.
  double clip = 1.0;
};

// The struct crosses the host/device boundary as raw bytes.
static_assert(std::is_trivially_copyable_v<StepScalars>);
static_assert(std::is_standard_layout_v<StepScalars>);

// The scalars of one step: AdamW update hp.step at hp.lr dividing out
// hp.grad_scale, and a cross-entropy gradient scaled by loss_scale over
// `tokens` positions. Throws std::invalid_argument for a step below 1, a
// non-positive grad_scale or loss_scale, or tokens < 1.
StepScalars make_step_scalars(const AdamWHyper& hp, float loss_scale, std::int64_t tokens);

}  // namespace tinyllama
