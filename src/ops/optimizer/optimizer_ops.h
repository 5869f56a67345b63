#pragma once
// AdamW, the gradient norm and its clip, the non-finite check of fp16 steps.
// A part of the contract every backend meets (model/step_ops.h composes the
// families; its conventions hold here too).
#include <cstdint>

#include "core/mat.h"
#include "model/step_scalars.h"

namespace tinyllama {

struct AdamWHyper {
  float lr = 3e-4f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.01f;
  int step = 1;  // 1-based, for bias correction
  // fp16 loss scaling: gradients arrive multiplied by grad_scale and the
  // update divides it out. When skip_flag (device memory) is non-null and
  // holds a non-zero value, the update is skipped entirely; it is read on the
  // device, so deciding to skip costs no host sync.
  float grad_scale = 1.0f;
  const std::int32_t* skip_flag = nullptr;
  // When set (backend memory), lr, step and grad_scale are read from here
  // when the update runs and the three fields above are ignored: a captured
  // optimizer step then replays with each step's values. beta1, beta2, eps
  // and weight_decay stay launch arguments and must match the ones the
  // scalars were made with (make_step_scalars).
  const StepScalars* scalars = nullptr;
  // False for a tensor outside the weight-decay group (UpdateRecipe::
  // decay_matrices_only's norm weights): the update skips the decay.
  bool apply_decay = true;
};

class OptimizerOps {
 public:
  virtual ~OptimizerOps() = default;

  // PyTorch AdamW on one contiguous block (param, grad, m, v share a shape).
  virtual void adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp) = 0;
  // The same over the whole flat state block in one sweep (padding included:
  // zero grads and zero params stay zero), also writing compute_copy =
  // param converted to its dtype when compute_copy is non-empty (AMP), so no
  // separate convert pass follows. Must be bit-identical to adamw followed by
  // convert(compute_copy, param); this default is that composition (the CPU
  // reference's implementation). param, grad, m, v, compute_copy contiguous.
  virtual void adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                           const AdamWHyper& hp) = 0;
  // adamw_fused() that may run concurrently with the ops issued after it,
  // until join_side_updates(); it starts after every op and every side GEMM
  // issued before it. For one layer's parameters, whose gradients are final
  // while the backward pass goes on through the layers below: the caller
  // joins before anything reads or writes those parameters, moments or
  // compute copy again. The CUDA backend with CUDA graphs on runs it on a
  // stream of its own (a third branch of the captured step); the default
  // joins the side GEMMs, runs adamw_fused() at once and returns ticket 0.
  // Returns a ticket for join_side_update. (The default is Backend's: the
  // joins are DeviceServices'.)
  virtual std::int64_t side_adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                                        const AdamWHyper& hp) = 0;

  // The gradient norm (UpdateRecipe: clipping, --log-grad-norm).
  // Doubles of backend memory sum_squares uses beside its accumulator.
  static constexpr int kSumSquaresScratch = 1024;
  // acc[0] += the sum of x's squared elements, in double, summed in an order
  // fixed by x's size alone (the same bits on every run, so a clipped run
  // resumes bit-exactly). acc: 1 + kSumSquaresScratch doubles of backend
  // memory; acc[1..] is scratch for partial sums.
  virtual void sum_squares(Mat x, double* acc) = 0;
  // From acc[0], the squared norm of the gradients as they are stored:
  // *norm = sqrt(acc[0]) * step->unscale (the norm of the unscaled
  // gradient, rounded to float), and with max_norm > 0 step->clip =
  // min(1, max_norm / (norm + 1e-6)) (torch.nn.utils.clip_grad_norm_'s
  // coefficient), which the AdamW updates multiply into the gradient.
  // acc, step and norm: backend memory; runs in stream order.
  virtual void clip_by_norm(const double* acc, double max_norm, StepScalars* step, float* norm) = 0;

  // *flag = 1 when any element of x is inf or nan; otherwise *flag is left
  // as it was (so several checks can share one flag). flag: device memory.
  virtual void flag_nonfinite(Mat x, std::int32_t* flag) = 0;
};

}  // namespace tinyllama
