#pragma once
// Causal GQA flash attention (level v2) behind the Backend contract with an
// empty probs Mat: no S x S buffer, the backward recomputes P from lse.
// head_dim 32, 64 or 128; any seq >= 1. Implemented in dispatch.cu.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/mat.h"
#include "model/backend.h"

namespace tinyllama::cuda {

// The backward's only scratch: D = rowsum(dO * O), fp32, one per query row.
struct FlashScratch {
  float* delta = nullptr;
  std::int64_t rows = 0;  // capacity: B * H * S
};
// The head_dims the flash kernels are instantiated for (DeviceCaps reads it).
inline constexpr int kFlashHeadDims[] = {32, 64, 128};
std::int64_t flash_attention_scratch_bytes(const AttentionShape& s);
FlashScratch flash_attention_scratch(void* base, const AttentionShape& s);
void flash_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v, const AttentionShape& shape,
                             cudaStream_t stream);
void flash_attention_backward(const FlashScratch& scratch, Mat dq, Mat dk, Mat dv, Mat dout, Mat q,
                              Mat k, Mat v, Mat out, Mat lse, const AttentionShape& shape,
                              cudaStream_t stream);

}  // namespace tinyllama::cuda
