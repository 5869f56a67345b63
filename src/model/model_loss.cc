// The tied LM head and the loss (DESIGN §1-2). FullLogits: the head GEMM
// over every row into the full [N, V] logits, cross-entropy, and in
// backward dlogits over them and the head's two gradient GEMMs.
// Chunked: the same per chunk of rows through one chunk-sized buffer, the
// loss and dlogits from one kernel; the head's weight gradient accumulates
// over the chunks (beta = 1 after the first) in chunk order on the side
// branch, and each chunk's GEMM waits for the previous chunk's weight
// gradient, which reads the buffer it overwrites.
#include <algorithm>

#include "core/op_marker.h"
#include "model/model.h"

namespace tinyllama {

Mat Model::padded_logits(Mat logits) {
  return Mat(logits.data, logits.dtype, logits.rows, logits.ld, logits.ld);
}

void Model::loss_forward(bool head_gradients) {
  if (plan_.ops.loss == LossImpl::Chunked) {
    chunked_head(head_gradients);
    head_backward_done_ = head_gradients;
    return;
  }
  OpSequence ops;
  const Mat nf = acts_.view(arena_, acts_.final_norm);
  const Mat logits = acts_.view(arena_, acts_.logits);
  // Tied LM head: logits = nf · Eᵀ over the padded vocabulary (zero rows
  // of E give zero logits past vocab_size, which the loss never reads).
  ops.next("lm_head_gemm");
  backend_.gemm(padded_logits(logits), nf, false, lm_head_weight(), true, 1.0f, 0.0f);
  ops.next("cross_entropy");
  backend_.cross_entropy_forward(micro_losses(), logits, targets_);
}

void Model::loss_backward() {
  if (plan_.ops.loss == LossImpl::Chunked) {
    // After a loss-only forward(), the head runs again here with gradients.
    if (!head_backward_done_) chunked_head(/*head_gradients=*/true);
    head_backward_done_ = false;
    return;
  }
  OpSequence ops;
  const Mat logits = acts_.view(arena_, acts_.logits);
  const Mat nf = acts_.view(arena_, acts_.final_norm);
  // In place: dlogits. The factor loss_scale / (B*S) is read from the
  // staged scalars when the kernel runs.
  ops.next("cross_entropy");
  backend_.cross_entropy_backward(logits, logits, targets_, step_scalars_);
  // Every weight gradient is a side GEMM that can run beside the input
  // gradient of the same layer, issued after it from before it
  // (Backend::side_gemm_from_fork). The tied head writes the embedding
  // gradient first; the embedding lookup accumulates into it at the end,
  // after the join. Over the padded vocabulary: the padding columns of
  // dlogits still hold the forward's zero logits, so the padding rows'
  // gradient is zero.
  backend_.fork_side_gemms();
  ops.next("lm_head_gemm_dgrad");
  backend_.gemm(acts_.view(arena_, acts_.d_norm_out), padded_logits(logits), false,
                lm_head_weight(), false, 1.0f, 0.0f);
  ops.next("lm_head_gemm_wgrad");
  head_wgrad_ticket_ = backend_.side_gemm_from_fork(lm_head_grad(), padded_logits(logits), true, nf,
                                                    false, 1.0f, 0.0f);
}

void Model::chunked_head(bool head_gradients) {
  OpSequence ops;
  const Mat nf = acts_.view(arena_, acts_.final_norm);
  const Mat dnf = acts_.view(arena_, acts_.d_norm_out);
  const Mat buffer = acts_.view(arena_, acts_.logits);
  const Mat losses = micro_losses();
  const std::int64_t n = nf.rows;
  const std::int64_t chunk = plan_.loss_chunk_rows;
  std::int64_t reader = -1;  // the side GEMM that reads the buffer
  for (std::int64_t r0 = 0; r0 < n; r0 += chunk) {
    const std::int64_t rows = std::min(chunk, n - r0);
    const Mat logits = buffer.row_block(0, rows);
    const Mat x = nf.row_block(r0, rows);
    backend_.join_side_gemm(reader);
    ops.next("lm_head_gemm");
    backend_.gemm(padded_logits(logits), x, false, lm_head_weight(), true, 1.0f, 0.0f);
    ops.next("cross_entropy");
    if (!head_gradients) {
      backend_.cross_entropy_forward(losses.row_block(r0, rows), logits, targets_ + r0);
      continue;
    }
    backend_.cross_entropy_fused(losses.row_block(r0, rows), logits, targets_ + r0, step_scalars_);
    backend_.fork_side_gemms();
    ops.next("lm_head_gemm_dgrad");
    backend_.gemm(dnf.row_block(r0, rows), padded_logits(logits), false, lm_head_weight(), false,
                  1.0f, 0.0f);
    ops.next("lm_head_gemm_wgrad");
    reader = backend_.side_gemm_from_fork(lm_head_grad(), padded_logits(logits), true, x, false,
                                          1.0f, r0 == 0 ? 0.0f : 1.0f);
  }
  if (head_gradients) head_wgrad_ticket_ = reader;
}

}  // namespace tinyllama
