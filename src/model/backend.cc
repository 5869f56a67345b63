// side_adamw_fused's default, which needs both sides of a Backend: the
// side GEMMs' join (DeviceServices) and the fused sweep (StepOps).
#include "model/backend.h"

namespace tinyllama {

std::int64_t Backend::side_adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                                       const AdamWHyper& hp) {
  join_side_gemms();  // the weight gradients it reads are complete first
  adamw_fused(param, grad, m, v, compute_copy, hp);
  return 0;
}

}  // namespace tinyllama
