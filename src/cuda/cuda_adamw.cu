// AdamW with PyTorch's semantics (torch.optim.AdamW, single-tensor path):
//   g = grad / grad_scale;  p *= 1 - lr*wd;  m = lerp(m, g, 1-b1);
//   v = b2*v + (1-b2)*g^2;  p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps).
// Bias corrections are computed on the host in double, once per call or, with
// AdamWHyper::scalars, once per step into device memory that the kernel reads
// when it runs (so a replayed CUDA graph uses each step's values). Under
// fp16 loss scaling the step is skipped on the device when the overflow flag
// is set (GradScaler's skipped step), so deciding costs no host sync.
#include <cmath>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_ops.h"

namespace tinyllama::cuda {
namespace {

struct AdamWArgs {
  float lr, beta1, beta2, eps, decay;  // decay = 1 - lr*wd
  float step_size;                     // lr / (1 - beta1^t)
  float bc2_sqrt;                      // sqrt(1 - beta2^t)
  float unscale;                       // 1 / grad_scale
  const std::int32_t* skip;            // device flag: non-zero skips the step; may be null
  // When set, decay, step_size, bc2_sqrt and unscale come from here instead.
  const StepScalars* step;
};

__global__ void adamw_kernel(float* __restrict__ p, std::int64_t ld_p, const float* __restrict__ g,
                             std::int64_t ld_g, float* __restrict__ m, std::int64_t ld_m,
                             float* __restrict__ v, std::int64_t ld_v, std::int64_t rows,
                             std::int64_t cols, AdamWArgs a) {
  if (a.skip != nullptr && *a.skip != 0) return;
  if (a.step != nullptr) {
    // Rounded to float exactly as the host rounds the by-value arguments.
    a.decay = static_cast<float>(a.step->decay);
    a.step_size = static_cast<float>(a.step->step_size);
    a.bc2_sqrt = static_cast<float>(a.step->bias2_sqrt);
    a.unscale = static_cast<float>(a.step->unscale);
  }
  const std::int64_t n = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols;
    const std::int64_t c = i - r * cols;
    const float grad = g[r * ld_g + c] * a.unscale;
    float mi = m[r * ld_m + c];
    float vi = v[r * ld_v + c];
    mi += (1.f - a.beta1) * (grad - mi);
    vi = a.beta2 * vi + (1.f - a.beta2) * grad * grad;
    const float denom = sqrtf(vi) / a.bc2_sqrt + a.eps;
    const float param = p[r * ld_p + c] * a.decay;
    p[r * ld_p + c] = param - a.step_size * mi / denom;
    m[r * ld_m + c] = mi;
    v[r * ld_v + c] = vi;
  }
}

// Sets *flag = 1 if any element is inf or nan; never clears it.
template <typename T>
__global__ void flag_nonfinite_kernel(const T* __restrict__ x, std::int64_t ld, std::int64_t rows,
                                      std::int64_t cols, std::int32_t* __restrict__ flag) {
  const std::int64_t n = rows * cols;
  bool bad = false;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols;
    bad |= !isfinite(to_f32(x[r * ld + (i - r * cols)]));
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1;
}

}  // namespace

void adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp, cudaStream_t stream) {
  const char* name = "adamw";
  for (const Mat* t : {&grad, &m, &v}) require_same_shape(name, param, *t);
  for (const Mat* t : {&param, &grad, &m, &v}) require_dtype(name, *t, DType::F32);
  if (hp.scalars == nullptr) {
    require(hp.step >= 1, name, "step must be 1-based");
    require(hp.grad_scale > 0.f, name, "grad_scale must be positive");
  }
  if (param.numel() == 0) return;
  AdamWArgs a{};
  a.lr = hp.lr;
  a.beta1 = hp.beta1;
  a.beta2 = hp.beta2;
  a.eps = hp.eps;
  a.decay = static_cast<float>(1.0 - static_cast<double>(hp.lr) * hp.weight_decay);
  a.step_size =
      static_cast<float>(hp.lr / (1.0 - std::pow(static_cast<double>(hp.beta1), hp.step)));
  a.bc2_sqrt =
      static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(hp.beta2), hp.step)));
  a.unscale = static_cast<float>(1.0 / static_cast<double>(hp.grad_scale));
  a.skip = hp.skip_flag;
  a.step = hp.scalars;
  adamw_kernel<<<grid_for(param.numel()), kThreads, 0, stream>>>(
      param.ptr<float>(), param.ld, grad.ptr<const float>(), grad.ld, m.ptr<float>(), m.ld,
      v.ptr<float>(), v.ld, param.rows, param.cols, a);
  CUDA_CHECK_LAUNCH();
}

void flag_nonfinite(Mat x, std::int32_t* flag, cudaStream_t stream) {
  const char* name = "flag_nonfinite";
  require(flag != nullptr, name, "flag pointer is null");
  if (x.numel() == 0) return;
  dispatch_float(x.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    flag_nonfinite_kernel<T><<<grid_for(x.numel()), kThreads, 0, stream>>>(x.ptr<const T>(), x.ld,
                                                                           x.rows, x.cols, flag);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tinyllama::cuda
