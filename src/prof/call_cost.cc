#include "prof/call_cost.h"

#include "cuda/cross_entropy_rows.h"

namespace tinyllama::prof {
namespace {

using i64 = std::int64_t;

// The order of weight when calls of several kinds make one op.
int weight(OpKind k) {
  switch (k) {
    case OpKind::Gemm:
      return 3;
    case OpKind::Attention:
      return 2;
    case OpKind::Optimizer:
      return 1;
    case OpKind::Elementwise:
      break;
  }
  return 0;
}

i64 sum_bytes(std::initializer_list<Mat> mats) {
  i64 b = 0;
  for (const Mat& m : mats) b += mat_bytes(m);
  return b;
}

// B·H·S²·hd: the causal half of one score square per head, times hd.
i64 causal_square(const AttentionShape& s) {
  return static_cast<i64>(s.batch) * s.heads * s.seq * s.seq * s.head_dim;
}

}  // namespace

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::Gemm:
      return "gemm";
    case OpKind::Attention:
      return "attention";
    case OpKind::Elementwise:
      return "elementwise";
    case OpKind::Optimizer:
      return "optimizer";
  }
  return "?";
}

std::int64_t mat_bytes(const Mat& m) {
  return m.empty() ? 0 : m.rows * m.cols * static_cast<i64>(dtype_size(m.dtype));
}

CallCost& operator+=(CallCost& a, const CallCost& b) {
  a.flops += b.flops;
  a.bytes += b.bytes;
  a.gemms += b.gemms;
  if (weight(b.kind) > weight(a.kind)) a.kind = b.kind;
  return a;
}

CallCost gemm_cost(const Mat& c, const Mat& a, bool trans_a, const Mat& b, float beta) {
  const i64 k = trans_a ? a.rows : a.cols;
  CallCost cost;
  cost.flops = 2 * c.rows * c.cols * k;
  cost.bytes = mat_bytes(a) + mat_bytes(b) + mat_bytes(c) * (beta != 0.0f ? 2 : 1);
  cost.gemms = 1;
  cost.kind = OpKind::Gemm;
  return cost;
}

CallCost gemm_add_cost(const Mat& d, const Mat& a, bool trans_a, const Mat& b, const Mat& c) {
  CallCost cost = gemm_cost(d, a, trans_a, b, 0.0f);
  cost.bytes += mat_bytes(c);
  return cost;
}

CallCost gemm_swiglu_forward_cost(const Mat& gate_up, const Mat& hidden, const Mat& x,
                                  const Mat& w_gu) {
  CallCost cost;
  cost.flops = 2 * x.rows * x.cols * w_gu.rows;
  cost.bytes = sum_bytes({x, w_gu, gate_up, hidden});
  cost.gemms = 1;
  cost.kind = OpKind::Gemm;
  return cost;
}

CallCost gemm_swiglu_backward_cost(const Mat& d_gate_up, const Mat& d_out, const Mat& w_down,
                                   const Mat& gate_up) {
  CallCost cost;
  cost.flops = 2 * d_out.rows * d_out.cols * w_down.cols;
  cost.bytes = sum_bytes({d_out, w_down, gate_up, d_gate_up});
  cost.gemms = 1;
  cost.kind = OpKind::Gemm;
  return cost;
}

CallCost elementwise_cost(std::initializer_list<Mat> reads, std::initializer_list<Mat> writes,
                          std::int64_t flops_per, const Mat& work) {
  CallCost cost;
  cost.flops = flops_per * work.rows * work.cols;
  cost.bytes = sum_bytes(reads) + sum_bytes(writes);
  return cost;
}

CallCost attention_forward_cost(const Mat& out, const Mat& lse, const Mat& probs, const Mat& q,
                                const Mat& k, const Mat& v, const AttentionShape& shape) {
  CallCost cost;
  cost.flops = 2 * causal_square(shape);
  cost.bytes = sum_bytes({q, k, v, out, lse, probs});
  cost.kind = OpKind::Attention;
  return cost;
}

CallCost attention_backward_cost(const Mat& dq, const Mat& dk, const Mat& dv, const Mat& dout,
                                 const Mat& q, const Mat& k, const Mat& v, const Mat& out,
                                 const Mat& lse, const Mat& probs, const AttentionShape& shape) {
  CallCost cost;
  cost.flops = 4 * causal_square(shape);
  // Materialised attention reads the saved probabilities instead of out.
  const i64 reads = sum_bytes({dout, q, k, v, lse, probs}) + (probs.empty() ? mat_bytes(out) : 0);
  cost.bytes = reads + sum_bytes({dq, dk, dv});
  cost.kind = OpKind::Attention;
  return cost;
}

std::int64_t rope_table_read_bytes(const AttentionShape& shape) {
  constexpr i64 kPairBytes = 8;  // an fp32 (cos, sin) pair
  return static_cast<i64>(shape.seq) * shape.head_dim / 2 * kPairBytes;
}

CallCost cross_entropy_fused_cost(const Mat& losses, const Mat& logits, LossRows rows) {
  const i64 row_bytes = logits.cols * static_cast<i64>(dtype_size(logits.dtype));
  const bool fits = (row_bytes + 15) / 16 * 16 <= cuda::kCrossEntropyStagedMaxRowBytesHopper;
  const bool staged = rows == LossRows::Staged ? fits
                      : rows == LossRows::Streamed
                          ? false
                          : cuda::cross_entropy_row_staged_on_hopper(row_bytes);
  CallCost cost;
  cost.flops = 2 * kCrossEntropyFlops * logits.rows * logits.cols;
  cost.bytes = (staged ? 2 : 3) * mat_bytes(logits) + logits.rows * kTokenBytes + mat_bytes(losses);
  return cost;
}

CallCost adamw_cost(const Mat& param, const Mat& compute_copy) {
  CallCost cost;
  cost.flops = kAdamWFlops * param.rows * param.cols;
  cost.bytes = 7 * mat_bytes(param) + mat_bytes(compute_copy);
  cost.kind = OpKind::Optimizer;
  return cost;
}

}  // namespace tinyllama::prof
