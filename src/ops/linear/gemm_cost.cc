#include "ops/linear/gemm_cost.h"

namespace tinyllama::prof {

CallCost gemm_cost(const Mat& c, const Mat& a, bool trans_a, const Mat& b, float beta) {
  const std::int64_t k = trans_a ? a.rows : a.cols;
  CallCost cost;
  cost.flops = 2 * c.rows * c.cols * k;
  cost.write_bytes = mat_bytes(c);
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

}  // namespace tinyllama::prof
