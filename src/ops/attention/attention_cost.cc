#include "ops/attention/attention_cost.h"

namespace tinyllama::prof {

namespace {

// B·H·S²·hd: the causal half of one score square per head, times hd.
std::int64_t causal_square(const AttentionShape& s) {
  return static_cast<std::int64_t>(s.batch) * s.heads * s.seq * s.seq * s.head_dim;
}

}  // namespace

CallCost attention_forward_cost(const Mat& out, const Mat& lse, const Mat& probs, const Mat& q,
                                const Mat& k, const Mat& v, const AttentionShape& shape) {
  CallCost cost;
  cost.flops = 2 * causal_square(shape);
  cost.write_bytes = mat_bytes({out, lse, probs});
  cost.bytes = mat_bytes({q, k, v}) + cost.write_bytes;
  cost.kind = OpKind::Attention;
  return cost;
}

CallCost attention_backward_cost(const Mat& dq, const Mat& dk, const Mat& dv, const Mat& dout,
                                 const Mat& q, const Mat& k, const Mat& v, const Mat& out,
                                 const Mat& lse, const Mat& probs, const AttentionShape& shape) {
  CallCost cost;
  cost.flops = 4 * causal_square(shape);
  // Materialised attention reads the saved probabilities instead of out.
  const std::int64_t reads =
      mat_bytes({dout, q, k, v, lse, probs}) + (probs.empty() ? mat_bytes(out) : 0);
  cost.write_bytes = mat_bytes({dq, dk, dv});
  cost.bytes = reads + cost.write_bytes;
  cost.kind = OpKind::Attention;
  return cost;
}

}  // namespace tinyllama::prof
