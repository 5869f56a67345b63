#include "ops/swiglu/swiglu_cost.h"

namespace tinyllama::prof {

CallCost gemm_swiglu_forward_cost(const Mat& gate_up, const Mat& hidden, const Mat& x,
                                  const Mat& w_gu) {
  CallCost cost;
  cost.flops = 2 * x.rows * x.cols * w_gu.rows;
  cost.write_bytes = mat_bytes({gate_up, hidden});
  cost.bytes = mat_bytes({x, w_gu}) + cost.write_bytes;
  cost.gemms = 1;
  cost.kind = OpKind::Gemm;
  return cost;
}

CallCost gemm_swiglu_backward_cost(const Mat& d_gate_up, const Mat& d_out, const Mat& w_down,
                                   const Mat& gate_up) {
  CallCost cost;
  cost.flops = 2 * d_out.rows * d_out.cols * w_down.cols;
  cost.write_bytes = mat_bytes(d_gate_up);
  cost.bytes = mat_bytes({d_out, w_down, gate_up}) + cost.write_bytes;
  cost.gemms = 1;
  cost.kind = OpKind::Gemm;
  return cost;
}

}  // namespace tinyllama::prof
