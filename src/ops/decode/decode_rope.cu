// RoPE at the positions of a decode step, fused with the KV-cache append:
// one pass over the new rows of qkv instead of a rotation and two copies.
// The angle is formed and reduced modulo 2*pi in double before the fp32
// sincos, as cuda_rope.cu does: at position ~1e3 an fp32 angle keeps only
// ~1e-4 rad.
#include <string>

#include "device/cuda_common.cuh"
#include "ops/decode/cuda_decode.h"

namespace tinyllama::cuda {
namespace {

// One thread per pair of a row: the (H + K) * hd / 2 pairs of q and k are
// rotated, then the K * hd / 2 pairs of v are copied.
template <typename T>
__global__ void rope_append_kernel(T* qkv, std::int64_t ld, T* k_cache, T* v_cache,
                                   std::int64_t ld_cache, const std::int32_t* first_position,
                                   const double* inv_freq, int q_dim, int kv_dim, int half_hd) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const int rotated_pairs = (q_dim + kv_dim) / 2;
  const int pair = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (pair >= rotated_pairs + kv_dim / 2) return;
  const std::int64_t r = blockIdx.y;
  const std::int64_t pos = *first_position + r;
  T* row = qkv + r * ld;
  const int c = 2 * pair;
  if (pair >= rotated_pairs) {  // v: appended as it is
    const int cv = c - q_dim - kv_dim;
    T* dst = v_cache + pos * ld_cache + cv;
    dst[0] = row[q_dim + kv_dim + cv];
    dst[1] = row[q_dim + kv_dim + cv + 1];
    return;
  }
  const double angle = static_cast<double>(pos) * inv_freq[pair % half_hd];
  const float reduced = static_cast<float>(angle - kTwoPi * rint(angle / kTwoPi));
  float s, co;
  sincosf(reduced, &s, &co);
  const float a = to_f32(row[c]);
  const float b = to_f32(row[c + 1]);
  const T ra = from_f32<T>(a * co - b * s);
  const T rb = from_f32<T>(a * s + b * co);
  if (c < q_dim) {
    row[c] = ra;
    row[c + 1] = rb;
  } else {  // k: only the cache keeps it (attention reads k from there)
    T* dst = k_cache + pos * ld_cache + (c - q_dim);
    dst[0] = ra;
    dst[1] = rb;
  }
}

}  // namespace

void rope_append(Mat qkv, Mat k_cache, Mat v_cache, const std::int32_t* first_position,
                 const double* inv_freq, int heads, int kv_heads, int head_dim,
                 cudaStream_t stream) {
  const char* op = "rope_append";
  require(head_dim > 0 && head_dim % 2 == 0, op, "head_dim must be positive and even");
  const int q_dim = heads * head_dim, kv_dim = kv_heads * head_dim;
  require(qkv.cols == q_dim + 2 * kv_dim, op,
          "qkv " + shape_str(qkv) + " is not [n, (H + 2K) * hd]");
  require(k_cache.cols == kv_dim && v_cache.cols == kv_dim && k_cache.ld == v_cache.ld &&
              k_cache.rows == v_cache.rows,
          op, "the caches " + shape_str(k_cache) + ", " + shape_str(v_cache) + " differ");
  require(qkv.dtype == k_cache.dtype && qkv.dtype == v_cache.dtype, op, "dtypes differ");
  require(qkv.rows <= k_cache.rows && qkv.rows <= 65535, op, "too many rows for the cache");
  if (qkv.rows == 0) return;
  dispatch_float(qkv.dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int pairs = (q_dim + 2 * kv_dim) / 2;
    const dim3 grid((pairs + kThreads - 1) / kThreads, static_cast<unsigned>(qkv.rows));
    rope_append_kernel<T><<<grid, kThreads, 0, stream>>>(
        qkv.ptr<T>(), qkv.ld, k_cache.ptr<T>(), v_cache.ptr<T>(), k_cache.ld, first_position,
        inv_freq, q_dim, kv_dim, head_dim / 2);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tinyllama::cuda
