#pragma once
// The token embedding and its gradient on the GPU.
// Host-side launchers: each checks its arguments, enqueues on the given
// stream and checks the launch; none allocates or synchronises.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/mat.h"

namespace tinyllama::cuda {

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

}  // namespace tinyllama::cuda
