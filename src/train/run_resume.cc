#include "train/run_resume.h"

#include <string>

#include "core/errors.h"
#include "train/checkpoint.h"

namespace tinyllama {

int resume_run(const TrainOptions& opts, int total, RunData& data, Backend& backend, Model& model,
               LossScaler& scaler, StepRunner& runner, TrainSummary& summary,
               const NoteCallback& on_note) {
  auto note = [&](const std::string& line) {
    if (on_note) on_note(line);
  };
  const std::string path = latest_checkpoint(opts.resume);
  const CheckpointState c = load_checkpoint(path, model, opts);
  if (c.steps_done >= total) {
    throw UsageError("--num-steps " + std::to_string(opts.num_steps) + ": " + path + " has " +
                     std::to_string(c.steps_done) +
                     " steps done, as many as --warmup-steps + "
                     "--num-steps (" +
                     std::to_string(total) + "); raise --num-steps to go on");
  }
  data.train().restore(c.sampler);
  // Before the first step: the GEMMs rerun the algorithms the checkpoint
  // was trained with instead of timing their own.
  if (!c.tuning.empty()) {
    const std::string why = backend.restore_tuning_state(c.tuning);
    if (!why.empty()) {
      note("resume: " + why +
           "; the resumed steps may round differently from an "
           "uninterrupted run");
    }
  }
  scaler.restore(c.loss_scale, c.clean_steps);
  runner.restore_applied_updates(c.applied_updates);
  const int start = c.steps_done;
  summary.resumed_from = path;
  summary.resumed_steps = start;
  note("resumed from " + path + " (" + std::to_string(start) + " steps done)");
  return start;
}

}  // namespace tinyllama
