// The forward graph: out = softmax(mask(scale * Q K^T)) V, and Stats, the
// log-sum-exp of each masked score row, for the backward to recompute P.
#include "ops/attention/cudnn/sdpa_graphs.h"

namespace tinyllama::cuda::cudnn {

void build_forward_graph(GraphBuilder& g, const SdpaDims& d) {
  const Tensor q = token_major(g, kUidQ, d, d.heads, d.ld_qkv);
  const Tensor kt = token_major_transposed(g, kUidK, d, d.kv_heads, d.ld_qkv);
  const Tensor v = token_major(g, kUidV, d, d.kv_heads, d.ld_qkv);
  const Tensor o = token_major(g, kUidO, d, d.heads, d.ld_out);
  const Tensor stats = row_stats(g, kUidStats, d);
  const Tensor scale = g.scalar(kUidScale, CUDNN_DATA_FLOAT);
  const Tensor mask_value = g.scalar(kUidMaskValue, CUDNN_DATA_FLOAT);

  const Tensor scores = causal_mask(g, scaled_scores(g, d, q, kt, scale), mask_value);

  // Softmax spelled out the way the fusion engines match it: the row max,
  // exp(x - max), the row sum, then Stats = max + log(sum) beside
  // P = exp(x - max) / sum. The fused kernel does this online, tile by tile.
  const Dims row_dims{d.batch, d.heads, d.seq, 1};
  const Tensor row_max = g.virtual_tensor(row_dims, CUDNN_DATA_FLOAT);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, scores, row_max);
  const Tensor shifted = g.virtual_tensor(scores.dims, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_SUB, scores, row_max, shifted, CUDNN_DATA_FLOAT);
  const Tensor exps = g.virtual_tensor(scores.dims, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_EXP, shifted, exps, CUDNN_DATA_FLOAT);
  const Tensor row_sum = g.virtual_tensor(row_dims, CUDNN_DATA_FLOAT);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, exps, row_sum);
  const Tensor log_sum = g.virtual_tensor(row_dims, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_LOG, row_sum, log_sum, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_ADD, row_max, log_sum, stats, CUDNN_DATA_FLOAT);
  // P in the io dtype: it is the A operand of the second matmul, which the
  // engine runs on tensor cores in bf16/fp16 like Q K^T.
  const Tensor p = g.virtual_tensor(scores.dims, d.io);
  g.pointwise(CUDNN_POINTWISE_DIV, exps, row_sum, p, CUDNN_DATA_FLOAT);

  // V broadcast over the query heads of its group.
  g.matmul(p, v, o);
}

}  // namespace tinyllama::cuda::cudnn
