// The backward graph, from the forward's Stats (P is recomputed, never
// stored):
//   D   = rowsum(dO * O)                       -> softmax_sum (workspace)
//   P   = exp(mask(scale * Q K^T) - Stats)
//   dV  = P^T dO        (summed over the query heads of each kv head)
//   dS  = P * (dO V^T - D) * scale
//   dK  = dS^T Q        (summed likewise)
//   dQ  = dS K          -> fp32 accumulator (workspace), then dQ
#include "ops/attention/cudnn/sdpa_graphs.h"

namespace tinyllama::cuda::cudnn {

namespace {

// The transpose of a [b, h, s, s] score-shaped tensor, as a view (no copy:
// the engine reads P and dS column-wise for dV and dK).
Tensor transposed_scores(GraphBuilder& g, const SdpaDims& d, const Tensor& x) {
  const Tensor y = g.virtual_tensor({d.batch, d.heads, d.seq, d.seq},
                                    {d.heads * d.seq * d.seq, d.seq * d.seq, 1, d.seq}, d.io);
  g.reshape(x, y);
  return y;
}

// out (kv heads) = a @ b over the query heads. With grouped-query attention
// the product is formed per query head and reduced over each group inside
// the graph, which the engine turns into dK/dV for the kv heads directly.
void matmul_into_kv_heads(GraphBuilder& g, const SdpaDims& d, const Tensor& a, const Tensor& b,
                          const Tensor& out) {
  if (d.heads == d.kv_heads) {
    g.matmul(a, b, out);
    return;
  }
  const Tensor per_query_head = g.virtual_tensor({d.batch, d.heads, d.seq, d.head_dim}, d.io);
  g.matmul(a, b, per_query_head);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, per_query_head, out);
}

}  // namespace

void build_backward_graph(GraphBuilder& g, const SdpaDims& d) {
  const Tensor q = token_major(g, kUidQ, d, d.heads, d.ld_qkv);
  const Tensor kt = token_major_transposed(g, kUidK, d, d.kv_heads, d.ld_qkv);
  const Tensor vt = token_major_transposed(g, kUidV, d, d.kv_heads, d.ld_qkv);
  const Tensor o = token_major(g, kUidO, d, d.heads, d.ld_out);
  const Tensor d_o = token_major(g, kUidDO, d, d.heads, d.ld_out);
  const Tensor stats = row_stats(g, kUidStats, d);
  const Tensor dq = token_major(g, kUidDQ, d, d.heads, d.ld_qkv);
  const Tensor dk = token_major(g, kUidDK, d, d.kv_heads, d.ld_qkv);
  const Tensor dv = token_major(g, kUidDV, d, d.kv_heads, d.ld_qkv);
  const Tensor scale = g.scalar(kUidScale, CUDNN_DATA_FLOAT);
  const Tensor mask_value = g.scalar(kUidMaskValue, CUDNN_DATA_FLOAT);
  const Tensor one = g.scalar(kUidOne, CUDNN_DATA_FLOAT);
  const Dims row_dims{d.batch, d.heads, d.seq, 1};
  const Dims head_dims{d.batch, d.heads, d.seq, d.head_dim};

  // D = rowsum(dO * O), materialised in the workspace: the engine computes
  // it in a pre-pass and reads it back per key tile. The multiply by one is
  // where the frontend's pattern applies the dropout scale; the engines
  // expect it there.
  const Tensor d_o_times_o = g.virtual_tensor(head_dims, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, d_o, o, d_o_times_o, CUDNN_DATA_FLOAT);
  const Tensor row_dot = g.virtual_tensor(row_dims, CUDNN_DATA_FLOAT);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, d_o_times_o, row_dot);
  const Tensor softmax_sum =
      g.tensor(kUidSoftmaxSum, row_dims, packed_strides(row_dims), CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, row_dot, one, softmax_sum, CUDNN_DATA_FLOAT);

  // P from Stats. The mask comes after the subtraction, as in the frontend's
  // backward pattern.
  const Tensor scores = scaled_scores(g, d, q, kt, scale);
  const Tensor centred = g.virtual_tensor(scores.dims, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_SUB, scores, stats, centred, CUDNN_DATA_FLOAT);
  const Tensor masked = causal_mask(g, centred, mask_value);
  const Tensor p = g.virtual_tensor(scores.dims, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_EXP, masked, p, CUDNN_DATA_FLOAT);

  // dV = P^T dO.
  matmul_into_kv_heads(g, d, transposed_scores(g, d, p), d_o, dv);

  // dS = P * (dO V^T - D) * scale.
  const Tensor dp = g.virtual_tensor(scores.dims, CUDNN_DATA_FLOAT);
  g.matmul(d_o, vt, dp);
  const Tensor dp_centred = g.virtual_tensor(scores.dims, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_SUB, dp, softmax_sum, dp_centred, CUDNN_DATA_FLOAT);
  const Tensor ds_unscaled = g.virtual_tensor(scores.dims, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, dp_centred, p, ds_unscaled, CUDNN_DATA_FLOAT);
  const Tensor ds = g.virtual_tensor(scores.dims, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, ds_unscaled, scale, ds, CUDNN_DATA_FLOAT);

  // dK = dS^T Q.
  matmul_into_kv_heads(g, d, transposed_scores(g, d, ds), q, dk);

  // dQ = dS K: K is the same memory as K^T seen untransposed (one uid, so a
  // reshape rather than a second tensor). The engine accumulates dQ across
  // key tiles in fp32 in the workspace, then converts it into dq.
  const Tensor k = g.virtual_tensor({d.batch, d.kv_heads, d.seq, d.head_dim},
                                    {d.seq * d.ld_qkv, d.head_dim, d.ld_qkv, 1}, d.io);
  g.reshape(kt, k);
  const Tensor dq_accum =
      g.tensor(kUidDqAccum, head_dims, packed_strides(head_dims), CUDNN_DATA_FLOAT);
  g.matmul(ds, k, dq_accum);
  g.pointwise(CUDNN_POINTWISE_IDENTITY, dq_accum, dq, CUDNN_DATA_FLOAT);
}

}  // namespace tinyllama::cuda::cudnn
