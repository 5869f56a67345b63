#pragma once
// RMSNorm on the GPU.
// Host-side launchers: each checks its arguments, enqueues on the given
// stream and checks the launch; none allocates or synchronises.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/mat.h"
#include "model/kernel_choices.h"
#include "ops/linear/cuda_fp8_cast.h"
#include "ops/norm/rmsnorm_partials.h"

namespace tinyllama::cuda {

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
// rmsnorm_apply whose result an FP8 GEMM reads (issue 45;
// cuda_rmsnorm_fp8.cu): one launch casts what rmsnorm_apply would store as
// fp8_cast_transpose casts the stored tensor, with *scale, into codes and
// codes_t (either may be null), raising *amax when it is not null; out is
// written too only when keep_out. bf16 in whole 64 x 64 tiles only: where
// the dtypes, shapes or alignments do not fit them, it launches nothing and
// returns false, and the caller runs rmsnorm_apply and the cast instead.
// rmsnorm_forward the same way, writing the row-major codes only (codes;
// a row a warp, any number of rows); bf16 rows of whole 16-byte vectors.
bool try_rmsnorm_forward_fp8(Mat out, bool keep_out, Mat rstd, Mat x, Mat weight, double eps,
                             const float* scale, Fp8Format f, Fp8View codes, float* amax,
                             cudaStream_t stream);
bool try_rmsnorm_apply_fp8(Mat out, bool keep_out, Mat x, Mat weight, Mat rstd, const float* scale,
                           Fp8Format f, Fp8View codes, Fp8View codes_t, float* amax,
                           cudaStream_t stream);
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
// kRmsnormPartialRows: ops/norm/rmsnorm_partials.h.
// After them in the workspace: the in-kernel sum's two counters (padded so
// the workspace after it stays aligned).
constexpr std::int64_t kRmsnormCounterBytes = 256;

}  // namespace tinyllama::cuda
