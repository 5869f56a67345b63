// The debugging exercise's noncontiguous-kv fault (model/faults.h,
// docs/EXERCISES.md): causal GQA attention forward, out and lse exactly as
// the flash forward leaves them (so the flash backward runs unchanged), but
// computed the slow way: one warp per query row, each lane walking its own
// keys -- every load of K and V is 32 lanes reading 32 different rows, one
// row stride apart (uncoalesced), with no tiles in shared memory and the
// output row accumulated in local memory. Correct and slow on purpose;
// never used outside --inject.
#include <cmath>

#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "ops/attention/cuda_strided_kv_attention.h"

namespace tinyllama::cuda {
namespace {

constexpr int kMaxHeadDim = 256;
constexpr unsigned kFullWarp = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(kFullWarp, x, offset);
  return x;
}

__device__ __forceinline__ float warp_max(float x) {
  for (int offset = 16; offset > 0; offset /= 2) {
    x = fmaxf(x, __shfl_xor_sync(kFullWarp, x, offset));
  }
  return x;
}

template <typename T>
__global__ void strided_kv_attention_kernel(T* out, std::int64_t ldo, float* lse,
                                            std::int64_t ld_lse, const T* q, std::int64_t ldq,
                                            const T* k, std::int64_t ldk, const T* v,
                                            std::int64_t ldv, AttentionShape s, float scale) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t row = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t rows = static_cast<std::int64_t>(s.batch) * s.heads * s.seq;
  if (row >= rows) return;  // whole warps leave together: rows are warp-sized units
  const int i = static_cast<int>(row % s.seq);
  const std::int64_t bh = row / s.seq;
  const int h = static_cast<int>(bh % s.heads);
  const std::int64_t b = bh / s.heads;
  const int kvh = h / (s.heads / s.kv_heads);
  const int hd = s.head_dim;
  const T* qi = q + (b * s.seq + i) * ldq + static_cast<std::int64_t>(h) * hd;

  float m = -INFINITY, l = 0.0f;
  float acc[kMaxHeadDim];
  for (int d = 0; d < hd; ++d) acc[d] = 0.0f;
  for (int j = lane; j <= i; j += 32) {
    const T* kj = k + (b * s.seq + j) * ldk + static_cast<std::int64_t>(kvh) * hd;
    const T* vj = v + (b * s.seq + j) * ldv + static_cast<std::int64_t>(kvh) * hd;
    float score = 0.0f;
    for (int d = 0; d < hd; ++d) score += to_f32(qi[d]) * to_f32(kj[d]);
    score *= scale;
    const float m_new = fmaxf(m, score);
    const float keep = expf(m - m_new);  // 0 for the first key (m = -inf)
    const float p = expf(score - m_new);
    l = l * keep + p;
    for (int d = 0; d < hd; ++d) acc[d] = acc[d] * keep + p * to_f32(vj[d]);
    m = m_new;
  }
  // Merge the lanes' partial softmaxes; lane 0 always has key 0, so m_all is finite.
  const float m_all = warp_max(m);
  const float f = l > 0.0f ? expf(m - m_all) : 0.0f;
  const float l_all = warp_sum(l * f);
  T* oi = out + (b * s.seq + i) * ldo + static_cast<std::int64_t>(h) * hd;
  for (int d = 0; d < hd; ++d) {
    const float a = warp_sum(acc[d] * f);
    if (lane == 0) oi[d] = from_f32<T>(a / l_all);
  }
  if (lane == 0) lse[bh * ld_lse + i] = m_all + logf(l_all);
}

}  // namespace

void strided_kv_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v, const AttentionShape& s,
                                  cudaStream_t stream) {
  const char* name = "strided_kv_attention_forward";
  require(out.dtype == q.dtype && k.dtype == q.dtype && v.dtype == q.dtype, name,
          "q, k, v and out must share one dtype");
  require(lse.dtype == DType::F32, name, "lse must be float32");
  require(s.head_dim <= kMaxHeadDim, name,
          "head_dim " + std::to_string(s.head_dim) + " above " + std::to_string(kMaxHeadDim));
  require(s.kv_heads > 0 && s.heads % s.kv_heads == 0, name, "kv heads must divide heads");
  require(q.rows == static_cast<std::int64_t>(s.batch) * s.seq &&
              q.cols == static_cast<std::int64_t>(s.heads) * s.head_dim &&
              k.cols == static_cast<std::int64_t>(s.kv_heads) * s.head_dim && v.cols == k.cols &&
              out.rows == q.rows && out.cols == q.cols &&
              lse.rows == static_cast<std::int64_t>(s.batch) * s.heads && lse.cols == s.seq,
          name, "shapes do not fit the attention shape");
  const std::int64_t rows = static_cast<std::int64_t>(s.batch) * s.heads * s.seq;
  if (rows == 0) return;
  const auto scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  constexpr int kThreads = 128;  // 4 query rows per block
  const std::int64_t blocks = (rows * 32 + kThreads - 1) / kThreads;
  dispatch_float(out.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(strided_kv_attention_kernel<T>, static_cast<unsigned>(blocks), kThreads, 0,
                  stream, out.ptr<T>(), out.ld, lse.ptr<float>(), lse.ld, q.ptr<const T>(), q.ld,
                  k.ptr<const T>(), k.ld, v.ptr<const T>(), v.ld, s, scale);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tinyllama::cuda
