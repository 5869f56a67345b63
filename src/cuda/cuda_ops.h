#pragma once
// Host-side launchers of the v1 kernels, one op family per .cu file. Each
// checks its arguments, enqueues on the given stream and checks the launch;
// none allocates or synchronises. Plain C++ so the backend class can live in
// a header that .cc files include.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/mat.h"
#include "model/backend.h"
#include "model/kernel_choices.h"

namespace tinyllama::cuda {

// cuda_convert.cu
void convert(Mat dst, Mat src, cudaStream_t stream);

// cuda_elementwise.cu
void add(Mat out, Mat a, Mat b, cudaStream_t stream);
void mul(Mat out, Mat a, Mat b, cudaStream_t stream);
void silu_forward(Mat out, Mat x, cudaStream_t stream);
void silu_backward(Mat dx, Mat dout, Mat x, cudaStream_t stream);
void swiglu_forward(Mat out, Mat gate, Mat up, cudaStream_t stream);
// cuda_strided_kv_attention.cu: the exercise fault noncontiguous-kv's slow
// attention forward (out and lse as the flash forward writes them).
void strided_kv_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v, const AttentionShape& s,
                                  cudaStream_t stream);
// cuda_naive_linear.cu: the exercise fault naive-swiglu's slow projection.
void naive_linear(Mat out, Mat x, Mat w, cudaStream_t stream);
void swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up, cudaStream_t stream);

// cuda_embedding.cu. Both gradients ADD into dtable (float32), where the
// tied LM head has written its part; a position whose token is outside
// [0, dtable.rows) adds nothing.
void embedding_forward(Mat out, const std::int32_t* tokens, Mat table, cudaStream_t stream);
void embedding_backward_scan(Mat dtable, const std::int32_t* tokens, Mat dout, cudaStream_t stream);
// Both gradients' argument checks (throws on a mismatch); false when there
// is nothing to add.
bool embedding_grad_has_work(const char* name, Mat dtable, Mat dout);

// cuda_embedding_sorted.cu: EmbeddingGradImpl::Sorted. Its scratch (the
// sort's keys and positions, cub's temporary storage, per-chunk partial
// sums) is planned before step 1 for at most `positions` rows of `dim`
// columns over a table of `vocab` rows, like every workspace; no call
// allocates. Sizing asks cub, which needs a CUDA device.
struct EmbeddingGradScratch {
  void* block = nullptr;
  std::int64_t positions = 0;
  std::int64_t dim = 0;
  std::int64_t vocab = 0;
  std::int64_t sort_bytes = 0;  // cub's temporary storage within the block

  static std::int64_t bytes_for(std::int64_t positions, std::int64_t dim, std::int64_t vocab);
  // The scratch in `block`, which holds bytes_for(positions, dim, vocab).
  static EmbeddingGradScratch assigned(void* block, std::int64_t positions, std::int64_t dim,
                                       std::int64_t vocab);
  bool empty() const { return block == nullptr; }
};
// Throws RuntimeFailure when the call is larger than the scratch was planned for.
void embedding_backward_sorted(Mat dtable, const std::int32_t* tokens, Mat dout,
                               const EmbeddingGradScratch& scratch, cudaStream_t stream);
// Its two halves. The sort of the n positions by token id (ids outside
// [0, vocab) last) depends on the tokens alone, so it may run long before
// the gradient exists; the accumulation then adds dout's rows (n = its
// rows, vocab = dtable's rows, the same as the sort's) in the sorted order
// the scratch holds.
void embedding_grad_sort(const std::int32_t* tokens, std::int64_t n, std::int64_t vocab,
                         const EmbeddingGradScratch& scratch, cudaStream_t stream);
void embedding_grad_accumulate(Mat dtable, Mat dout, const EmbeddingGradScratch& scratch,
                               cudaStream_t stream);

// cuda_rmsnorm.cu. The backward pass writes per-block partial sums of
// dweight into `partials` (capacity floats) and adds them in a fixed order,
// so dweight is deterministic without atomics: in a second kernel, or, with
// `counters` (two unsigneds, zero before the first call; each call leaves
// them zero) on a small grid, in the backward kernel's last blocks (one
// launch instead of two, the same bits).
// With a non-empty dresidual, backward also adds it into dx (NormImpl::Fused).
void rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps, cudaStream_t stream);
// out = x * rstd * weight with a saved rstd: what rmsnorm_forward (and
// add_rmsnorm_forward) wrote, to the bit.
void rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd, cudaStream_t stream);
// The second kernel's work: `blocks` partial rows of dim floats to add, in
// order, into dweight (blocks 0: nothing left to add).
struct RmsnormPartialSum {
  float* dweight = nullptr;
  const float* partials = nullptr;
  int blocks = 0;
  std::int64_t dim = 0;
};
// With defer_sum, a second kernel is not launched but described there, for
// the caller to run with rmsnorm_sum_partials on a stream of its choice,
// after this call's kernel and before `partials` is written again.
void rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd, Mat dresidual,
                      float* partials, std::int64_t capacity, unsigned* counters,
                      const KernelChoices& kernels, cudaStream_t stream,
                      RmsnormPartialSum* defer_sum = nullptr);
void rmsnorm_sum_partials(const RmsnormPartialSum& sum, cudaStream_t stream);
// The plan's kernels (KernelChoices::norm_weight_sum, norm_long_rows) pick
// where the weight gradient's partial rows are summed, and whether long
// rows take the team kernel (cuda_rmsnorm_team.cuh) or the one-warp
// shared-memory kernel it replaced there.
// Whether a backward call over `rows` rows of `dim` (with the planned
// kRmsnormPartialRows of partial rows) sums its partial rows in a second
// kernel: its grid is too large for the in-kernel sum, or the plan says so.
bool rmsnorm_backward_sums_in_second_kernel(std::int64_t rows, std::int64_t dim, NormWeightSum sum);
// cuda_residual_norm.cu: sum = a + b, out = RMSNorm(sum), in one pass.
void add_rmsnorm_forward(Mat sum, Mat out, Mat rstd, Mat a, Mat b, Mat weight, double eps,
                         cudaStream_t stream);
// Partial rows the backward pass uses at most (blocks of its grid, which is
// also capped at the blocks resident at once: 2-3 per SM of an H100 at the
// model's widths); the workspace is this many rows of hidden_dim floats.
constexpr int kRmsnormPartialRows = 1056;
// After them in the workspace: the in-kernel sum's two counters (padded so
// the workspace after it stays aligned).
constexpr std::int64_t kRmsnormCounterBytes = 256;

// cuda_rope.cu. inverse = the backward pass.
void rope(Mat x, int seq, int head_dim, double theta, bool inverse, cudaStream_t stream);
// RopeImpl::Fused: the (cos, sin) fp32 pairs of every (position < seq,
// pair) angle, as rope() forms them (flash_attention.h's RopeTable), into
// cos_sin, rope_table_bytes() bytes.
std::int64_t rope_table_bytes(int seq, int head_dim);
void rope_table(float* cos_sin, int seq, int head_dim, double theta, cudaStream_t stream);

// cuda_cross_entropy_fused.cu: losses, and dlogits over the logits with
// the scale read from device memory when the kernel runs.
// `rows` is the plan's (KernelChoices::loss_rows): Auto stages rows of
// kCrossEntropyStagedMinRowBytes or more in shared memory (one DRAM read a
// row instead of two; cross_entropy_rows.h), Staged every row that fits,
// Streamed none.
void cross_entropy_fused(Mat losses, Mat logits, const std::int32_t* targets,
                         const float* scale_on_device, LossRows rows, cudaStream_t stream);
// Whether a row of `cols` logits of `dtype` is staged under `rows` (rows of
// 16-byte aligned vectors only; the call checks that itself).
bool cross_entropy_rows_staged(std::int64_t cols, DType dtype, LossRows rows);
// cuda_cross_entropy.cu
void cross_entropy_forward(Mat losses, Mat logits, const std::int32_t* targets,
                           cudaStream_t stream);
void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets, float scale,
                            cudaStream_t stream);
// The scale read from device memory when the kernel runs (graph replays).
void cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                            const float* scale_on_device, cudaStream_t stream);

// cuda_adamw.cu
void adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp, cudaStream_t stream);
// The whole flat block in one sweep (contiguous views), also writing
// compute_copy = param in its dtype when non-empty; bit-identical to adamw
// followed by convert.
void adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy, const AdamWHyper& hp,
                 cudaStream_t stream);
// *flag = 1 when any element of x is inf or nan; otherwise *flag is untouched.
void flag_nonfinite(Mat x, std::int32_t* flag, cudaStream_t stream);

// cuda_grad_norm.cu: Backend::sum_squares and Backend::clip_by_norm.
void sum_squares(Mat x, double* acc, cudaStream_t stream);
void clip_by_norm(const double* acc, double max_norm, StepScalars* step, float* norm,
                  cudaStream_t stream);

}  // namespace tinyllama::cuda
