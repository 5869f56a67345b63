#include "ops/optimizer/optimizer_cost.h"

namespace tinyllama::prof {

CallCost adamw_cost(const Mat& param, const Mat& compute_copy) {
  CallCost cost;
  cost.flops = kAdamWFlops * param.rows * param.cols;
  cost.bytes = 7 * mat_bytes(param) + mat_bytes(compute_copy);
  cost.kind = OpKind::Optimizer;
  return cost;
}

}  // namespace tinyllama::prof
