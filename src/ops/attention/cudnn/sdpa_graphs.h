#pragma once
// The two operation graphs of causal scaled-dot-product attention in the
// shape cuDNN's runtime fusion engines recognise as "fused flash attention"
// (the pattern the cudnn-frontend's composite SDPA nodes lower to, for
// cuDNN releases without the single-operation SDPA descriptors):
//
//   forward:  S = scale * Q K^T, causal mask, softmax (with its log-sum-exp
//             written as Stats), O = P V
//   backward: P recomputed from Stats, D = rowsum(dO * O), dV = P^T dO,
//             dS = P * (dO V^T - D) * scale, dK = dS^T Q, dQ = dS K
//
// Tensors are described over the caller's memory with strides, so q/k/v are
// read in place as column blocks of the qkv buffer and K/V are never
// repeated for grouped-query attention: the matmuls broadcast the kv head
// over its group, and dK/dV are reduced over the group inside the graph.
#include <cudnn.h>

#include <cstdint>

#include "ops/attention/cudnn/graph_builders.h"

namespace tinyllama::cuda::cudnn {

// The uids the caller binds at execution (virtual tensors start at
// GraphBuilder::kFirstVirtualUid).
enum SdpaUid : std::int64_t {
  kUidQ = 1,
  kUidK,
  kUidV,
  kUidO,
  kUidStats,  // fp32 [b, h, s, 1]: log-sum-exp of each masked, scaled score row
  kUidDO,
  kUidDQ,
  kUidDK,
  kUidDV,
  kUidScale,       // host float, by value: 1/sqrt(head_dim)
  kUidMaskValue,   // host float, by value: what masked scores become
  kUidOne,         // host float, by value: 1 (the softmax-sum's dropout scale)
  kUidSoftmaxSum,  // workspace, fp32 [b, h, s, 1]: rowsum(dO * O)
  kUidDqAccum,     // workspace, fp32 [b, h, s, d]: dQ accumulated across key tiles
};

struct SdpaDims {
  std::int64_t batch = 0, heads = 0, kv_heads = 0, seq = 0, head_dim = 0;
  std::int64_t ld_qkv = 0;  // row stride of q/k/v and dq/dk/dv, in elements
  std::int64_t ld_out = 0;  // row stride of out and dout
  cudnnDataType_t io = CUDNN_DATA_BFLOAT16;

  std::int64_t softmax_sum_bytes() const { return batch * heads * seq * 4; }
  std::int64_t dq_accum_bytes() const { return batch * heads * seq * head_dim * 4; }
};

void build_forward_graph(GraphBuilder& g, const SdpaDims& d);
void build_backward_graph(GraphBuilder& g, const SdpaDims& d);

// ---- parts shared by both graphs (sdpa_graph_parts.cc) ----------------------

// [b, heads, s, d] over rows of `ld` elements: row b*S+s, head h at column
// h*d (the heads of one token are adjacent in its row).
Tensor token_major(GraphBuilder& g, std::int64_t uid, const SdpaDims& d, std::int64_t heads,
                   std::int64_t ld);
// The same memory seen transposed, [b, heads, d, s] (K^T for Q K^T).
Tensor token_major_transposed(GraphBuilder& g, std::int64_t uid, const SdpaDims& d,
                              std::int64_t heads, std::int64_t ld);
// fp32 [b, h, s, 1], contiguous: the lse layout [B*H, S].
Tensor row_stats(GraphBuilder& g, std::int64_t uid, const SdpaDims& d);

// scale * (Q K^T): fp32 [b, h, s, s], K^T broadcast over the GQA group.
Tensor scaled_scores(GraphBuilder& g, const SdpaDims& d, const Tensor& q, const Tensor& kt,
                     const Tensor& scale);
// Top-left causal mask: x where row >= column, mask_value elsewhere.
Tensor causal_mask(GraphBuilder& g, const Tensor& x, const Tensor& mask_value);

}  // namespace tinyllama::cuda::cudnn
