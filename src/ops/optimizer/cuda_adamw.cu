// AdamW with PyTorch's semantics (torch.optim.AdamW, single-tensor path):
//   g = grad / grad_scale;  p *= 1 - lr*wd;  m = lerp(m, g, 1-b1);
//   v = b2*v + (1-b2)*g^2;  p -= (lr / (1-b1^t)) * m / (sqrt(v) / sqrt(1-b2^t) + eps).
// Bias corrections are computed on the host in double, once per call or, with
// AdamWHyper::scalars, once per step into device memory that the kernel reads
// when it runs (so a replayed CUDA graph uses each step's values). Under
// fp16 loss scaling the step is skipped on the device when the overflow flag
// is set (GradScaler's skipped step), so deciding costs no host sync.
#include <cmath>
#include <cstdint>

#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "ops/optimizer/cuda_adamw.h"

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
  bool apply_decay;  // false: outside the weight-decay group (decay stays 1)
};

// Each launch's scalars: the staged per-step values when a.step is set.
__device__ __forceinline__ void load_step_scalars(AdamWArgs& a) {
  if (a.step != nullptr) {
    // Rounded to float exactly as the host rounds the by-value arguments.
    a.decay = static_cast<float>(a.step->decay);
    a.step_size = static_cast<float>(a.step->step_size);
    a.bc2_sqrt = static_cast<float>(a.step->bias2_sqrt);
    // The clip coefficient (1 unless clipping) in the same rounding.
    a.unscale = static_cast<float>(a.step->unscale * a.step->clip);
  }
  if (!a.apply_decay) a.decay = 1.f;
}

// The one per-element update both kernels share, so the per-tensor and the
// fused sweep compile to the same arithmetic (same FMA contractions) and
// give bit-identical results.
__device__ __forceinline__ void adamw_update(float& p, float& m, float& v, float g,
                                             const AdamWArgs& a) {
  const float grad = g * a.unscale;
  m += (1.f - a.beta1) * (grad - m);
  v = a.beta2 * v + (1.f - a.beta2) * grad * grad;
  const float denom = sqrtf(v) / a.bc2_sqrt + a.eps;
  const float param = p * a.decay;
  p = param - a.step_size * m / denom;
}

__global__ void adamw_kernel(float* __restrict__ p, std::int64_t ld_p, const float* __restrict__ g,
                             std::int64_t ld_g, float* __restrict__ m, std::int64_t ld_m,
                             float* __restrict__ v, std::int64_t ld_v, std::int64_t rows,
                             std::int64_t cols, AdamWArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  if (a.skip != nullptr && *a.skip != 0) return;
  load_step_scalars(a);
  const std::int64_t n = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols;
    const std::int64_t c = i - r * cols;
    float pi = p[r * ld_p + c];
    float mi = m[r * ld_m + c];
    float vi = v[r * ld_v + c];
    adamw_update(pi, mi, vi, g[r * ld_g + c], a);
    p[r * ld_p + c] = pi;
    m[r * ld_m + c] = mi;
    v[r * ld_v + c] = vi;
  }
}

// Four compute-copy elements stored at once (16 bytes in fp32, 8 in bf16/fp16).
template <typename TC>
struct alignas(4 * sizeof(TC)) Pack4 {
  TC x[4];
};

// The fused sweep: one launch over the whole flat state block, and under AMP
// the compute copy written from the updated fp32 value (what convert_kernel
// would compute from it). Elements [0, head) and [head + 4 * nvec, n) go one
// at a time; the body in float4s, where every pointer is 16-byte aligned
// (the copy 4 * sizeof(TC)) -- the host checks that, else nvec = 0.
template <typename TC, bool kCopy>
__global__ void adamw_fused_kernel(float* __restrict__ p, const float* __restrict__ g,
                                   float* __restrict__ m, float* __restrict__ v,
                                   TC* __restrict__ copy, std::int64_t n, std::int64_t head,
                                   std::int64_t nvec, AdamWArgs a) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  if (a.skip != nullptr && *a.skip != 0) return;
  load_step_scalars(a);
  const std::int64_t tid = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;

  auto* p4 = reinterpret_cast<float4*>(p + head);
  const auto* g4 = reinterpret_cast<const float4*>(g + head);
  auto* m4 = reinterpret_cast<float4*>(m + head);
  auto* v4 = reinterpret_cast<float4*>(v + head);
  for (std::int64_t j = tid; j < nvec; j += stride) {
    float4 pj = p4[j];
    float4 mj = m4[j];
    float4 vj = v4[j];
    const float4 gj = g4[j];
    adamw_update(pj.x, mj.x, vj.x, gj.x, a);
    adamw_update(pj.y, mj.y, vj.y, gj.y, a);
    adamw_update(pj.z, mj.z, vj.z, gj.z, a);
    adamw_update(pj.w, mj.w, vj.w, gj.w, a);
    p4[j] = pj;
    m4[j] = mj;
    v4[j] = vj;
    if constexpr (kCopy) {
      Pack4<TC> c;
      c.x[0] = from_f32<TC>(pj.x);
      c.x[1] = from_f32<TC>(pj.y);
      c.x[2] = from_f32<TC>(pj.z);
      c.x[3] = from_f32<TC>(pj.w);
      reinterpret_cast<Pack4<TC>*>(copy + head)[j] = c;
    }
  }

  // The scalar rest: the head before the first aligned element and the tail
  // after the last whole vector (all of n when the body is not aligned).
  const std::int64_t body_end = head + 4 * nvec;
  const std::int64_t rest = head + (n - body_end);
  for (std::int64_t k = tid; k < rest; k += stride) {
    const std::int64_t i = k < head ? k : body_end + (k - head);
    float pi = p[i];
    float mi = m[i];
    float vi = v[i];
    adamw_update(pi, mi, vi, g[i], a);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
    if constexpr (kCopy) copy[i] = from_f32<TC>(pi);
  }
}

// Sets *flag = 1 if any element is inf or nan; never clears it.
template <typename T>
__global__ void flag_nonfinite_kernel(const T* __restrict__ x, std::int64_t ld, std::int64_t rows,
                                      std::int64_t cols, std::int32_t* __restrict__ flag) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t n = rows * cols;
  bool bad = false;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols;
    bad |= !isfinite(to_f32(x[r * ld + (i - r * cols)]));
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) *flag = 1;
}

// The launch arguments of hp: bias corrections on the host in double, each
// rounded once to float (the staged StepScalars are rounded the same way).
AdamWArgs make_args(const AdamWHyper& hp) {
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
  a.apply_decay = hp.apply_decay;
  return a;
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
  const AdamWArgs a = make_args(hp);
  launch_kernel(adamw_kernel, grid_for(param.numel()), kThreads, 0, stream, param.ptr<float>(),
                param.ld, grad.ptr<const float>(), grad.ld, m.ptr<float>(), m.ld, v.ptr<float>(),
                v.ld, param.rows, param.cols, a);
  CUDA_CHECK_LAUNCH();
}

void adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy, const AdamWHyper& hp,
                 cudaStream_t stream) {
  const char* name = "adamw_fused";
  for (const Mat* t : {&grad, &m, &v}) require_same_shape(name, param, *t);
  for (const Mat* t : {&param, &grad, &m, &v}) require_dtype(name, *t, DType::F32);
  const bool with_copy = !compute_copy.empty();
  if (with_copy) require_same_shape(name, param, compute_copy);
  for (const Mat* t : {&param, &grad, &m, &v}) {
    require(t->contiguous(), name, "every block must be contiguous (one flat sweep)");
  }
  if (with_copy) require(compute_copy.contiguous(), name, "compute_copy must be contiguous");
  if (hp.scalars == nullptr) {
    require(hp.step >= 1, name, "step must be 1-based");
    require(hp.grad_scale > 0.f, name, "grad_scale must be positive");
  }
  const std::int64_t n = param.numel();
  if (n == 0) return;
  const AdamWArgs a = make_args(hp);

  // Vector body only when one head length aligns every pointer: fp32 blocks
  // to 16 bytes, the copy to 4 elements. The model's blocks start 256-byte
  // aligned, so there the head is 0; views at odd offsets still work.
  const auto addr = [](const void* q) { return reinterpret_cast<std::uintptr_t>(q); };
  const std::uintptr_t p_addr = addr(param.data);
  std::int64_t head = 0, nvec = 0;
  if (p_addr % 4 == 0) {
    head = static_cast<std::int64_t>((16 - p_addr % 16) % 16 / 4);
    if (head > n) head = n;
    bool aligned = true;
    for (const Mat* t : {&grad, &m, &v}) aligned = aligned && (addr(t->data) + 4 * head) % 16 == 0;
    if (with_copy) {
      const std::size_t cs = dtype_size(compute_copy.dtype);
      aligned = aligned && (addr(compute_copy.data) + cs * head) % (4 * cs) == 0;
    }
    if (aligned) nvec = (n - head) / 4;
  }
  if (nvec == 0) head = 0;  // all scalar: the rest loop covers [0, n)
  const std::int64_t items = nvec + head + (n - head - 4 * nvec);
  const unsigned blocks = grid_for(items);
  if (!with_copy) {
    launch_kernel(adamw_fused_kernel<float, false>, blocks, kThreads, 0, stream, param.ptr<float>(),
                  grad.ptr<const float>(), m.ptr<float>(), v.ptr<float>(), nullptr, n, head, nvec,
                  a);
    CUDA_CHECK_LAUNCH();
    return;
  }
  dispatch_float(compute_copy.dtype, name, [&](auto tag) {
    using TC = typename decltype(tag)::type;
    launch_kernel(adamw_fused_kernel<TC, true>, blocks, kThreads, 0, stream, param.ptr<float>(),
                  grad.ptr<const float>(), m.ptr<float>(), v.ptr<float>(), compute_copy.ptr<TC>(),
                  n, head, nvec, a);
    CUDA_CHECK_LAUNCH();
  });
}

void flag_nonfinite(Mat x, std::int32_t* flag, cudaStream_t stream) {
  const char* name = "flag_nonfinite";
  require(flag != nullptr, name, "flag pointer is null");
  if (x.numel() == 0) return;
  dispatch_float(x.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(flag_nonfinite_kernel<T>, grid_for(x.numel()), kThreads, 0, stream,
                  x.ptr<const T>(), x.ld, x.rows, x.cols, flag);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tinyllama::cuda
