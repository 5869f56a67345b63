// CudaBackend's op routing: each Backend op forwards its arguments to its
// op family (one .cu file each) on the main stream; attention picks its
// implementation here. Lifecycle, memory, graphs, GEMMs and the side
// branches are in cuda_backend.cu.
#include <cstdint>
#include <string>
#include <utility>

#include "core/errors.h"
#include "cuda/cuda_backend.h"
#include "ops/attention/cuda_attention_choice.h"
#include "ops/attention/cuda_strided_kv_attention.h"
#include "ops/elementwise/cuda_elementwise.h"
#include "ops/embedding/cuda_embedding.h"
#include "ops/linear/cuda_naive_linear.h"
#include "ops/loss/cuda_cross_entropy.h"
#include "ops/norm/cuda_rmsnorm.h"
#include "ops/optimizer/cuda_adamw.h"
#include "ops/optimizer/cuda_grad_norm.h"
#include "ops/rope/cuda_rope.h"
#include "ops/swiglu/cuda_swiglu.h"
#include "ops/swiglu/swiglu_gemm/swiglu_gemm.h"

namespace tinyllama::cuda {

void CudaBackend::add(Mat out, Mat a, Mat b) {
  cuda::add(out, a, b, stream_);
}
void CudaBackend::mul(Mat out, Mat a, Mat b) {
  cuda::mul(out, a, b, stream_);
}

void CudaBackend::embedding_forward(Mat out, const std::int32_t* tokens, Mat table) {
  cuda::embedding_forward(out, tokens, table, stream_);
}

// The plan's choice, through what prepare() set up: sorted when it planned
// the sort's scratch, else the scan (which is also what a backend that was
// never prepared runs).
void CudaBackend::embedding_backward(Mat dtable, const std::int32_t* tokens, Mat dout) {
  const SortedTokens sorted = std::exchange(sorted_tokens_, SortedTokens{});
  // The prepared sort writes the scratch: after it either way.
  if (sorted.ticket >= 0) updates_->join(stream_, sorted.ticket);
  if (embedding_scratch_.empty()) {
    cuda::embedding_backward_scan(dtable, tokens, dout, stream_);
  } else if (sorted.tokens == tokens && sorted.n == dout.rows && sorted.vocab == dtable.rows) {
    cuda::embedding_grad_accumulate(dtable, dout, embedding_scratch_, stream_);
  } else {
    cuda::embedding_backward_sorted(dtable, tokens, dout, embedding_scratch_, stream_);
  }
}

// The sort on the update stream, which has nothing to do until the first
// layer's sweep: at the workshop's size it took 17 us of the step's tail,
// after the last layer's backward (docs/log/2026-11-25.md).
void CudaBackend::embedding_backward_prepare(const std::int32_t* tokens, std::int64_t n,
                                             std::int64_t vocab) {
  sorted_tokens_ = SortedTokens{};
  if (embedding_scratch_.empty() || n == 0) return;
  if (!side_enabled_) {
    cuda::embedding_grad_sort(tokens, n, vocab, embedding_scratch_, stream_);
    sorted_tokens_ = SortedTokens{tokens, n, vocab, -1};
    return;
  }
  updates_->fork(stream_);
  cuda::embedding_grad_sort(tokens, n, vocab, embedding_scratch_, updates_->stream());
  sorted_tokens_ = SortedTokens{tokens, n, vocab, updates_->mark()};
}

std::string CudaBackend::tuning_state() const {
  return GemmRunner::export_tuned_choices();
}

std::string CudaBackend::restore_tuning_state(const std::string& text) {
  return GemmRunner::import_tuned_choices(text);
}

void CudaBackend::rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps) {
  cuda::rmsnorm_forward(out, rstd, x, weight, eps, stream_);
}

void CudaBackend::rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd) {
  norm_backward(dx, dweight, dout, x, weight, rstd, Mat());
}

// The weight gradient's sum of the partial rows, where the grid is too
// large for the in-kernel sum, runs on the side branch: only the optimizer
// reads dweight (its sweeps order after the side branch), and the next op
// of the backward pass need not wait for it (at B32 S1024 it was 14 us of
// each norm's 72 on the main stream; docs/log/2026-11-25.md). The
// next norm writes the other set of partial rows; a set is written again
// only after the sum that read it.
void CudaBackend::norm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd,
                                Mat dresidual) {
  const int set = rms_next_set_;
  float* partials = rms_partials_ + set * rms_partial_capacity_;
  if (!side_enabled_) {
    cuda::rmsnorm_backward(dx, dweight, dout, x, weight, rstd, dresidual, partials,
                           rms_partial_capacity_, rms_counters_, kernels_, stream_);
    return;
  }
  side_->join(stream_, rms_sum_tickets_[static_cast<std::size_t>(set)]);
  cuda::RmsnormPartialSum sum;
  cuda::rmsnorm_backward(dx, dweight, dout, x, weight, rstd, dresidual, partials,
                         rms_partial_capacity_, rms_counters_, kernels_, stream_, &sum);
  if (sum.blocks == 0) return;  // summed in the kernel
  side_->fork(stream_);
  cuda::rmsnorm_sum_partials(sum, side_->stream());
  rms_sum_tickets_[static_cast<std::size_t>(set)] = side_->mark();
  rms_next_set_ = (set + 1) % rms_partial_sets_;
}

void CudaBackend::rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd) {
  cuda::rmsnorm_apply(out, x, weight, rstd, stream_);
}

void CudaBackend::add_rmsnorm_forward(Mat sum, Mat out, Mat rstd, Mat a, Mat b, Mat weight,
                                      double eps) {
  cuda::add_rmsnorm_forward(sum, out, rstd, a, b, weight, eps, stream_);
}

void CudaBackend::rmsnorm_backward_add(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd,
                                       Mat dresidual) {
  norm_backward(dx, dweight, dout, x, weight, rstd, dresidual);
}

void CudaBackend::rope_forward(Mat x, int seq, int head_dim, double theta) {
  cuda::rope(x, seq, head_dim, theta, false, stream_);
}

void CudaBackend::rope_backward(Mat dx, int seq, int head_dim, double theta) {
  cuda::rope(dx, seq, head_dim, theta, true, stream_);
}

void CudaBackend::require_rope_table(const char* op, double rope_theta) const {
  if (rope_table_.cos_sin == nullptr || rope_table_.theta != rope_theta) {
    throw RuntimeFailure(std::string(op) + ": no RoPE table was prepared for theta " +
                         std::to_string(rope_theta) +
                         " (prepare() builds it for a plan with rope fused)");
  }
}

const CudnnSdpa& CudaBackend::prepared_cudnn(const char* op) const {
  if (cudnn_ == nullptr) {
    throw RuntimeFailure(std::string(op) +
                         ": cuDNN attention was not prepared (a plan with attention cudnn)");
  }
  return *cudnn_;
}

void CudaBackend::attention_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q, Mat k,
                                    Mat v, const AttentionShape& shape) {
  require_probs_match(impl, probs, "attention_forward");
  switch (forward_attention(impl)) {
    case AttentionImpl::Materialized:
      materialized_attention_forward(*gemm_, materialized_scratch_, out, lse, probs, q, k, v, shape,
                                     stream_);
      return;
    case AttentionImpl::Flash:
      flash_attention_forward(kernels_, out, lse, q, k, v, shape, stream_);
      return;
    case AttentionImpl::Cudnn:
      prepared_cudnn("attention_forward").forward(out, lse, q, k, v, attention_block_, stream_);
      return;
    case AttentionImpl::CudnnFlash:  // forward_attention maps it to Cudnn
    case AttentionImpl::Auto:
      break;
  }
  throw RuntimeFailure("attention_forward: attention auto was not resolved");
}

void CudaBackend::attention_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout, Mat q,
                                     Mat k, Mat v, Mat out, Mat lse, Mat probs,
                                     const AttentionShape& shape) {
  require_probs_match(impl, probs, "attention_backward");
  switch (backward_attention(impl)) {
    case AttentionImpl::Materialized:
      materialized_attention_backward(*gemm_, materialized_scratch_, dq, dk, dv, dout, q, k, v, out,
                                      lse, probs, shape, stream_);
      return;
    case AttentionImpl::Flash:
      flash_attention_backward(kernels_, flash_scratch_, dq, dk, dv, dout, q, k, v, out, lse, shape,
                               stream_);
      return;
    case AttentionImpl::Cudnn:
      if (!cudnn_backward_planned_) {
        throw RuntimeFailure(
            "attention_backward: cuDNN's backward has no workspace here (attention cudnn+flash "
            "plans cuDNN's forward only)");
      }
      prepared_cudnn("attention_backward")
          .backward(dq, dk, dv, dout, q, k, v, out, lse, attention_block_, stream_);
      return;
    case AttentionImpl::CudnnFlash:  // backward_attention maps it to Flash
    case AttentionImpl::Auto:
      break;
  }
  throw RuntimeFailure("attention_backward: attention auto was not resolved");
}

void CudaBackend::attention_rope_forward(AttentionImpl impl, Mat out, Mat lse, Mat probs, Mat q,
                                         Mat k, Mat v, Mat q_rot, Mat k_rot, Mat v_copy,
                                         const AttentionShape& shape, double rope_theta) {
  if (impl != AttentionImpl::Flash) {
    compose_attention_rope_forward(*this, impl, out, lse, probs, q, k, v, q_rot, k_rot, v_copy,
                                   shape, rope_theta);
    return;
  }
  require_probs_match(impl, probs, "attention_rope_forward");
  require_rope_table("attention_rope_forward", rope_theta);
  const FlashRopeForward rope{&rope_table_, q_rot, k_rot, v_copy};
  flash_attention_forward(kernels_, out, lse, q, k, v, shape, stream_, &rope);
}

void CudaBackend::attention_rope_backward(AttentionImpl impl, Mat dq, Mat dk, Mat dv, Mat dout,
                                          Mat q, Mat k, Mat v, Mat out, Mat lse, Mat probs,
                                          const AttentionShape& shape, double rope_theta) {
  if (backward_attention(impl) != AttentionImpl::Flash) {
    Backend::attention_rope_backward(impl, dq, dk, dv, dout, q, k, v, out, lse, probs, shape,
                                     rope_theta);
    return;
  }
  require_probs_match(impl, probs, "attention_rope_backward");
  require_rope_table("attention_rope_backward", rope_theta);
  flash_attention_backward(kernels_, flash_scratch_, dq, dk, dv, dout, q, k, v, out, lse, shape,
                           stream_, &rope_table_);
}

void CudaBackend::silu_forward(Mat out, Mat x) {
  cuda::silu_forward(out, x, stream_);
}

void CudaBackend::silu_backward(Mat dx, Mat dout, Mat x) {
  cuda::silu_backward(dx, dout, x, stream_);
}

void CudaBackend::strided_kv_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v,
                                               const AttentionShape& shape) {
  cuda::strided_kv_attention_forward(out, lse, q, k, v, shape, stream_);
}

void CudaBackend::naive_linear(Mat out, Mat x, Mat w) {
  cuda::naive_linear(out, x, w, stream_);
}

void CudaBackend::swiglu_forward(Mat out, Mat gate, Mat up) {
  cuda::swiglu_forward(out, gate, up, stream_);
}

void CudaBackend::swiglu_backward(Mat dgate, Mat dup, Mat dout, Mat gate, Mat up) {
  cuda::swiglu_backward(dgate, dup, dout, gate, up, stream_);
}

void CudaBackend::gemm_swiglu_forward(Mat gate_up, Mat hidden, Mat x, Mat w_gu) {
  if (!swiglu_gemm_unsupported(facts_, x.dtype, x.cols, hidden.cols).empty()) {
    Backend::gemm_swiglu_forward(gate_up, hidden, x, w_gu);
    return;
  }
  cuda::gemm_swiglu_forward(gate_up, hidden, x, w_gu, kernels_.swiglu_forward, stream_);
}

void CudaBackend::gemm_swiglu_backward(Mat d_gate_up, Mat d_hidden, Mat d_out, Mat w_down,
                                       Mat gate_up) {
  if (!swiglu_gemm_unsupported(facts_, d_out.dtype, d_out.cols, w_down.cols).empty()) {
    Backend::gemm_swiglu_backward(d_gate_up, d_hidden, d_out, w_down, gate_up);
    return;
  }
  cuda::gemm_swiglu_backward(d_gate_up, d_out, w_down, gate_up, kernels_.swiglu_backward, stream_);
}

void CudaBackend::cross_entropy_forward(Mat losses, Mat logits, const std::int32_t* targets) {
  cuda::cross_entropy_forward(losses, logits, targets, stream_);
}

void CudaBackend::cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                                         float scale) {
  cuda::cross_entropy_backward(dlogits, logits, targets, scale, stream_);
}

void CudaBackend::cross_entropy_backward(Mat dlogits, Mat logits, const std::int32_t* targets,
                                         const StepScalars* step) {
  cuda::cross_entropy_backward(dlogits, logits, targets, &step->ce_grad_scale, stream_);
}

void CudaBackend::cross_entropy_fused(Mat losses, Mat logits, const std::int32_t* targets,
                                      const StepScalars* step) {
  cuda::cross_entropy_fused(losses, logits, targets, &step->ce_grad_scale, kernels_.loss_rows,
                            stream_);
}

void CudaBackend::adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp) {
  cuda::adamw(param, grad, m, v, hp, stream_);
}

void CudaBackend::adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                              const AdamWHyper& hp) {
  cuda::adamw_fused(param, grad, m, v, compute_copy, hp, stream_);
}

void CudaBackend::flag_nonfinite(Mat x, std::int32_t* flag) {
  cuda::flag_nonfinite(x, flag, stream_);
}

void CudaBackend::sum_squares(Mat x, double* acc) {
  cuda::sum_squares(x, acc, stream_);
}

void CudaBackend::clip_by_norm(const double* acc, double max_norm, StepScalars* step, float* norm) {
  cuda::clip_by_norm(acc, max_norm, step, norm, stream_);
}

}  // namespace tinyllama::cuda
