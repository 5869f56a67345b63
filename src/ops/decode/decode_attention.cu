// Attention of a decode step's queries over the KV cache, flash-decoding
// style: the cache is cut into chunks, each (chunk, head, query) is one
// block whose warps run an online softmax over alternate rows, and a second
// kernel merges the chunks. Scores, softmax and sums are fp32 whatever the
// storage dtype. A key is read by a whole warp (lane d holds dims d, d + 32,
// ...), so any even head_dim up to 256 works and every load is coalesced.
#include <cmath>
#include <string>

#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "ops/decode/cuda_decode.h"

namespace tinyllama::cuda {
namespace {

constexpr int kMaxHeadDim = 256;
constexpr int kWarps = 4;

// The block's partial over its warps' rows: each warp's output and sum
// rescaled to the block's max, into the scratch slot.
__device__ __forceinline__ void write_block_partial(const float (&warp_m)[kWarps],
                                                    const float (&warp_l)[kWarps],
                                                    const float (&warp_o)[kWarps][kMaxHeadDim],
                                                    int head_dim, std::int64_t slot, float* part_o,
                                                    float* part_ml) {
  float block_m = -INFINITY;  // finite: warp 0 had row `start`
  for (int w = 0; w < kWarps; ++w) block_m = fmaxf(block_m, warp_m[w]);
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float sum = 0.f;
    for (int w = 0; w < kWarps; ++w) sum += warp_o[w][d] * expf(warp_m[w] - block_m);
    part_o[slot * head_dim + d] = sum;
  }
  if (threadIdx.x == 0) {
    float sum = 0.f;
    for (int w = 0; w < kWarps; ++w) sum += warp_l[w] * expf(warp_m[w] - block_m);
    part_ml[2 * slot] = block_m;
    part_ml[2 * slot + 1] = sum;
  }
}

// Per (split, head, query): the chunk's unnormalised output (sum p_j v_j
// with p_j = exp(s_j - m)) and its max m and sum l, into the scratch.
template <typename T, int kDimsPerLane>
__global__ void __launch_bounds__(kWarps * 32)
    attention_partial_kernel(const T* q, std::int64_t ld_q, const T* k_cache, const T* v_cache,
                             std::int64_t ld_kv, const std::int32_t* first_position, int group,
                             int head_dim, int chunk, int splits, float scale, float* part_o,
                             float* part_ml) {
  pdl_allow_next();
  pdl_wait_previous();  // q and the cache row come from the kernel before
  const int split = blockIdx.x, h = blockIdx.y, t = blockIdx.z, heads = gridDim.y;
  const int len = *first_position + t + 1;  // causal: positions 0 .. first + t
  const int start = split * chunk;
  if (start >= len) return;  // the merge reads only the chunks that hold rows
  const int end = min(start + chunk, len);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const std::int64_t kv_col = static_cast<std::int64_t>(h / group) * head_dim;

  float qr[kDimsPerLane], o[kDimsPerLane];
  const T* qh = q + t * ld_q + static_cast<std::int64_t>(h) * head_dim;
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int d = lane + 32 * i;
    qr[i] = d < head_dim ? to_f32(qh[d]) * scale : 0.f;
    o[i] = 0.f;
  }
  // Row j's key and value, read one row ahead of the arithmetic: a warp's
  // rows are a chain of dependent steps, and the next row's loads need not
  // wait for this one's softmax.
  float k_next[kDimsPerLane], v_next[kDimsPerLane];
  auto load_row = [&](int j) {
    const T* kj = k_cache + j * ld_kv + kv_col;
    const T* vj = v_cache + j * ld_kv + kv_col;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      const int d = lane + 32 * i;
      k_next[i] = d < head_dim ? to_f32(kj[d]) : 0.f;
      v_next[i] = d < head_dim ? to_f32(vj[d]) : 0.f;
    }
  };
  if (start + warp < end) load_row(start + warp);
  float m = -INFINITY, l = 0.f;
  for (int j = start + warp; j < end; j += kWarps) {
    float kr[kDimsPerLane], vr[kDimsPerLane];
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) {
      kr[i] = k_next[i];
      vr[i] = v_next[i];
    }
    if (j + kWarps < end) load_row(j + kWarps);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) s += qr[i] * kr[i];  // 0 past head_dim
    s = warp_sum(s);
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 at the first row (m = -inf)
    const float p = expf(s - m_new);
    l = l * correction + p;
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) o[i] = o[i] * correction + p * vr[i];
    m = m_new;
  }

  __shared__ float warp_m[kWarps], warp_l[kWarps];
  __shared__ float warp_o[kWarps][kMaxHeadDim];
  if (lane == 0) {
    warp_m[warp] = m;
    warp_l[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < head_dim) warp_o[warp][d] = o[i];
  }
  __syncthreads();
  write_block_partial(warp_m, warp_l, warp_o, head_dim,
                      (static_cast<std::int64_t>(t) * heads + h) * splits + split, part_o, part_ml);
}

// Per (head, query): the chunks that hold rows, rescaled to a common max
// and normalised.
template <typename T>
__global__ void attention_merge_kernel(T* out, std::int64_t ld_out,
                                       const std::int32_t* first_position, int head_dim, int chunk,
                                       int splits, const float* part_o, const float* part_ml) {
  pdl_allow_next();
  pdl_wait_previous();
  const int h = blockIdx.x, t = blockIdx.y, heads = gridDim.x;
  const int len = *first_position + t + 1;
  const int used = min(splits, (len + chunk - 1) / chunk);
  const std::int64_t first = (static_cast<std::int64_t>(t) * heads + h) * splits;
  float m = -INFINITY;
  for (int s = 0; s < used; ++s) m = fmaxf(m, part_ml[2 * (first + s)]);
  float l = 0.f;
  for (int s = 0; s < used; ++s) {
    l += part_ml[2 * (first + s) + 1] * expf(part_ml[2 * (first + s)] - m);
  }
  T* o = out + t * ld_out + static_cast<std::int64_t>(h) * head_dim;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float sum = 0.f;
    for (int s = 0; s < used; ++s) {
      sum += part_o[(first + s) * head_dim + d] * expf(part_ml[2 * (first + s)] - m);
    }
    o[d] = from_f32<T>(sum / l);
  }
}

}  // namespace

std::int64_t decode_attention_scratch_floats(std::int64_t queries_times_splits, int heads,
                                             int head_dim) {
  return queries_times_splits * heads * (head_dim + 2);
}

void decode_attention(Mat out, Mat q, Mat k_cache, Mat v_cache, const std::int32_t* first_position,
                      int heads, int kv_heads, int head_dim, int splits, float* scratch,
                      std::int64_t scratch_floats, cudaStream_t stream, bool programmatic) {
  const char* op = "decode_attention";
  require(heads > 0 && kv_heads > 0 && heads % kv_heads == 0, op,
          "heads must be a positive multiple of kv_heads");
  require(head_dim > 0 && head_dim <= kMaxHeadDim, op,
          "head_dim " + std::to_string(head_dim) + " must lie in [1, 256]");
  require(q.cols == std::int64_t{heads} * head_dim, op, "q " + shape_str(q) + " is not [n, H*hd]");
  require_same_shape(op, out, q);
  require(k_cache.cols == std::int64_t{kv_heads} * head_dim, op,
          "k_cache " + shape_str(k_cache) + " is not [positions, K*hd]");
  require_same_shape(op, v_cache, k_cache);
  require(out.dtype == q.dtype && q.dtype == k_cache.dtype && q.dtype == v_cache.dtype, op,
          "dtypes differ");
  require(splits >= 1 && q.rows <= 65535, op, "splits must be >= 1, queries at most 65535");
  require(decode_attention_scratch_floats(q.rows * splits, heads, head_dim) <= scratch_floats, op,
          "the scratch is smaller than " + std::to_string(q.rows) + " queries x " +
              std::to_string(splits) + " splits need");
  if (q.rows == 0) return;
  const int chunk = static_cast<int>((k_cache.rows + splits - 1) / splits);
  float* part_o = scratch;
  float* part_ml = scratch + q.rows * splits * heads * head_dim;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  dispatch_float(q.dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto partial = [&](auto dims) {
      constexpr int kDims = decltype(dims)::value;
      const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(heads),
                      static_cast<unsigned>(q.rows));
      launch_with_pdl(attention_partial_kernel<T, kDims>, grid, dim3(kWarps * 32), 0, stream,
                      programmatic, q.ptr<T>(), q.ld, k_cache.ptr<T>(), v_cache.ptr<T>(),
                      k_cache.ld, first_position, heads / kv_heads, head_dim, chunk, splits, scale,
                      part_o, part_ml);
    };
    if (head_dim <= 32) {
      partial(std::integral_constant<int, 1>{});
    } else if (head_dim <= 64) {
      partial(std::integral_constant<int, 2>{});
    } else if (head_dim <= 128) {
      partial(std::integral_constant<int, 4>{});
    } else {
      partial(std::integral_constant<int, 8>{});
    }
    const dim3 grid(static_cast<unsigned>(heads), static_cast<unsigned>(q.rows));
    launch_with_pdl(attention_merge_kernel<T>, grid, dim3(128), 0, stream, programmatic,
                    out.ptr<T>(), out.ld, first_position, head_dim, chunk, splits, part_o,
                    static_cast<const float*>(part_ml));
  });
}

}  // namespace tinyllama::cuda
