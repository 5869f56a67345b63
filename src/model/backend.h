#pragma once
// What the model runs a step on: a device's services (model/device_services.h)
// and the ops its passes call (model/step_ops.h) in one object, so that code
// holding a Backend& reaches both; the ops that exist for the debugging
// exercise and the kernel bench alone (model/exercise_ops.h) are reached
// through exercise_ops(), null where a backend has none. A function that
// needs one side only may take that interface instead.
#include <cstdint>

#include "model/device_services.h"
#include "model/exercise_ops.h"
#include "model/step_ops.h"

namespace tinyllama {

class Backend : public DeviceServices, public StepOps {
 public:
  ~Backend() override = default;

  // The exercise ops (model/exercise_ops.h) of a backend that implements
  // them, else nullptr (this default); a caller with none throws
  // RuntimeFailure.
  virtual ExerciseOps* exercise_ops() { return nullptr; }

  // StepOps::side_adamw_fused's default: joins the side GEMMs, runs
  // adamw_fused() at once and returns ticket 0.
  std::int64_t side_adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                                const AdamWHyper& hp) override;
};

}  // namespace tinyllama
