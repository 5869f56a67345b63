#include "ops/optimizer/optimizer_cost.h"

namespace tinyllama::prof {

CallCost adamw_cost(const Mat& param, const Mat& compute_copy) {
  CallCost cost;
  cost.flops = kAdamWFlops * param.rows * param.cols;
  // Reads the fp32 parameter, gradient and both moments; writes all but
  // the gradient, and the compute copy.
  cost.write_bytes = 3 * mat_bytes(param) + mat_bytes(compute_copy);
  cost.bytes = 4 * mat_bytes(param) + cost.write_bytes;
  cost.kind = OpKind::Optimizer;
  return cost;
}

}  // namespace tinyllama::prof
