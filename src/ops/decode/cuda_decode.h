#pragma once
// The kernels incremental decoding needs beyond the training step's, as
// host-side launchers (checked arguments, one stream, no allocation, no
// synchronisation). The position of the first new token is read from
// device memory when the kernels run, so one captured decode step replays
// at every position.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/mat.h"

namespace tinyllama::cuda {

// decode_rope.cu. qkv: [n, (H + 2K) * hd], the fused QKV GEMM's output.
// Rotates the q and k columns of row r by position *first_position + r
// (interleaved pairs, DESIGN §1; inv_freq[i] = theta^(-2i/hd) in device
// memory, hd/2 doubles), leaves q in place and writes k and v to rows
// *first_position + r of the caches ([max_positions, K * hd]).
void rope_append(Mat qkv, Mat k_cache, Mat v_cache, const std::int32_t* first_position,
                 const double* inv_freq, int heads, int kv_heads, int head_dim,
                 cudaStream_t stream);

// decode_attention.cu: causal GQA attention of n new queries (q: [n, H*hd],
// rows at positions *first_position + t) over the cache rows
// [0, *first_position + t], scale 1/sqrt(hd), query head h reading kv head
// h / (H/K). The cache is split into `splits` chunks attended to by blocks of
// their own (flash-decoding: at n = 1 one block per head would leave most
// of the GPU idle); a second kernel merges the chunks' online-softmax
// partial results. Scratch: decode_attention_scratch_floats(...).
// programmatic: both kernels launched with PDL, as gemv_fused's.
std::int64_t decode_attention_scratch_floats(std::int64_t queries_times_splits, int heads,
                                             int head_dim);
void decode_attention(Mat out, Mat q, Mat k_cache, Mat v_cache, const std::int32_t* first_position,
                      int heads, int kv_heads, int head_dim, int splits, float* scratch,
                      std::int64_t scratch_floats, cudaStream_t stream, bool programmatic = false);

// gemv.cu: y[1, N] = x[1, K] * w[N, K]^T (+ residual[1, N] when non-empty;
// y may alias residual), fp32 accumulation. w is a weight in tinyllama's
// [out, in] layout, read once with 16-byte loads: a decode step at batch 1
// is this op over every weight, so it is what sets tokens/s.
void gemv(Mat y, Mat x, Mat w, Mat residual, cudaStream_t stream);

// gemv_fused.cu: the batch-1 products with their neighbours folded in, for
// a step of six kernels per layer. The input x [1, K] is staged per block in
// shared memory (K * sizeof(dtype) at most 48 KiB: gemv_fused_fits); with a
// norm weight [1, K] x is the float32 residual stream and the weight
// float32 (as autocast keeps both), RMS-normalised (eps, fp32 statistics)
// and rounded to w's dtype as the unfused step stores it; without one x has
// w's dtype. Outputs are rounded where the unfused step stores them, so
// both paths round alike.
// programmatic: launched with programmatic stream serialization (PDL), so
// the kernel's blocks start streaming weights while the kernel before it
// in the stream finishes; they wait for it to complete before reading
// anything else. Each kernel lets the next start as soon as it runs.
bool gemv_fused_fits(std::int64_t k, DType t);
// y = norm(x) w^T (+ y when accumulate): y w's dtype or float32.
void gemv_fused(Mat y, Mat x, Mat w, const Mat* norm_weight, double eps, bool accumulate,
                cudaStream_t stream, bool programmatic = false);
// act [1, F] = silu(g) * u with [g | u] = norm(x) w_gate_up^T ([2F, K]:
// gate rows, then up rows), g and u rounded first as swiglu_forward reads them.
void gemv_norm_swiglu(Mat act, Mat x, Mat w_gate_up, Mat norm_weight, double eps,
                      cudaStream_t stream, bool programmatic = false);
// [q | k | v] = norm(x) w_qkv^T, then rope_append's work: q and k rotated
// at position *position (inv_freq as rope_append's), q into q [1, H * hd],
// k and v into row *position of the caches.
void gemv_norm_qkv_rope(Mat q, Mat k_cache, Mat v_cache, Mat x, Mat w_qkv, Mat norm_weight,
                        double eps, const std::int32_t* position, const double* inv_freq, int heads,
                        int kv_heads, int head_dim, cudaStream_t stream, bool programmatic = false);

}  // namespace tinyllama::cuda
