#pragma once
// Materialised causal GQA attention, the v1 way (the workshop's naive
// PyTorch attention): K/V repeated per query head into scratch buffers,
// S x S scores from batched GEMMs into the caller's probs buffer, a softmax
// kernel with the causal mask, and batched GEMMs for the output and the
// gradients. Flash attention (src/ops/attention/flash) keeps no probs.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/mat.h"
#include "model/backend.h"
#include "ops/linear/cuda_gemm.h"

namespace tinyllama::cuda {

// Device scratch for one attention call, sized in prepare(). Head buffers
// are [B, H, S, hd] in the compute dtype.
struct AttentionScratch {
  DType dtype = DType::F32;
  std::int64_t head_elems = 0;   // capacity of each head buffer
  std::int64_t score_elems = 0;  // capacity of dscores: [B*H*S, S]
  void* q = nullptr;             // gathered q
  void* k = nullptr;             // k repeated over the group
  void* v = nullptr;             // v repeated over the group
  void* o = nullptr;             // output before the scatter; dout in backward
  void* dq = nullptr;
  void* dk = nullptr;  // per query head, reduced over the group at the end
  void* dv = nullptr;
  void* dscores = nullptr;  // dP, then dS in place

  static std::int64_t bytes_for(const AttentionShape& s, DType dtype);
  // The buffers carved out of one allocation of bytes_for() bytes.
  static AttentionScratch assigned(void* base, const AttentionShape& s, DType dtype);
};

// probs: [B*H*S, S], written by the forward, read by the backward.
void materialized_attention_forward(GemmRunner& gemm, const AttentionScratch& scratch, Mat out,
                                    Mat lse, Mat probs, Mat q, Mat k, Mat v,
                                    const AttentionShape& shape, cudaStream_t stream);
void materialized_attention_backward(GemmRunner& gemm, const AttentionScratch& scratch, Mat dq,
                                     Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v, Mat out,
                                     Mat lse, Mat probs, const AttentionShape& shape,
                                     cudaStream_t stream);

}  // namespace tinyllama::cuda
