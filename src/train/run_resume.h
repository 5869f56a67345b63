#pragma once
// --resume: continuing a run from the newest checkpoint in a directory.
#include "model/model.h"
#include "train/loss_scaler.h"
#include "train/options.h"
#include "train/run_data.h"
#include "train/step_runner.h"
#include "train/trainer.h"

namespace tinyllama {

// Loads the latest checkpoint's weights, sampler, GEMM choices, loss scale
// and update count into the run's parts and notes it in `summary`. Returns
// the steps done before this process. Throws UsageError when the checkpoint
// already has `total` (warm-up + timed) steps done.
int resume_run(const TrainOptions& opts, int total, RunData& data, Backend& backend, Model& model,
               LossScaler& scaler, StepRunner& runner, TrainSummary& summary,
               const NoteCallback& on_note);

}  // namespace tinyllama
