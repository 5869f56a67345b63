#include "ops/attention/cudnn/sdpa_graphs.h"

namespace tinyllama::cuda::cudnn {

Tensor token_major(GraphBuilder& g, std::int64_t uid, const SdpaDims& d, std::int64_t heads,
                   std::int64_t ld) {
  // Batch b starts S rows further on; head h is head_dim columns further
  // on; position s is one row further on; the head's elements are adjacent.
  return g.tensor(uid, {d.batch, heads, d.seq, d.head_dim}, {d.seq * ld, d.head_dim, ld, 1}, d.io);
}

Tensor token_major_transposed(GraphBuilder& g, std::int64_t uid, const SdpaDims& d,
                              std::int64_t heads, std::int64_t ld) {
  return g.tensor(uid, {d.batch, heads, d.head_dim, d.seq}, {d.seq * ld, d.head_dim, 1, ld}, d.io);
}

Tensor row_stats(GraphBuilder& g, std::int64_t uid, const SdpaDims& d) {
  return g.tensor(uid, {d.batch, d.heads, d.seq, 1}, {d.heads * d.seq, d.seq, 1, 1},
                  CUDNN_DATA_FLOAT);
}

Tensor scaled_scores(GraphBuilder& g, const SdpaDims& d, const Tensor& q, const Tensor& kt,
                     const Tensor& scale) {
  const Dims score_dims{d.batch, d.heads, d.seq, d.seq};
  const Tensor s = g.virtual_tensor(score_dims, CUDNN_DATA_FLOAT);
  g.matmul(q, kt, s);
  const Tensor scaled = g.virtual_tensor(score_dims, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_MUL, s, scale, scaled, CUDNN_DATA_FLOAT);
  return scaled;
}

Tensor causal_mask(GraphBuilder& g, const Tensor& x, const Tensor& mask_value) {
  // Query i (row, axis 2) keeps key j (column, axis 3) when i >= j. The
  // engines match this index/compare/select chain as the causal mask and
  // skip the key tiles above the diagonal instead of computing them.
  const Tensor row = g.virtual_tensor(x.dims, x.strides, CUDNN_DATA_INT32);
  g.gen_index(x, row, 2);
  const Tensor col = g.virtual_tensor(x.dims, x.strides, CUDNN_DATA_INT32);
  g.gen_index(x, col, 3);
  const Tensor keep = g.virtual_tensor(x.dims, x.strides, CUDNN_DATA_BOOLEAN);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, col, keep, CUDNN_DATA_BOOLEAN);
  const Tensor y = g.virtual_tensor(x.dims, x.strides, CUDNN_DATA_FLOAT);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, x, mask_value, keep, y, CUDNN_DATA_FLOAT);
  return y;
}

}  // namespace tinyllama::cuda::cudnn
