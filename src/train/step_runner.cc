#include "train/step_runner.h"

#include <exception>
#include <limits>

#include "core/errors.h"

namespace tinyllama {
namespace {

// Timer marks around the phases of a step. kStart and kEnd are recorded
// outside any graph, so whole-step time includes the graph's launch; the two
// inside become event-record nodes of a captured graph.
enum Mark { kStart, kForwardDone, kBackwardDone, kEnd, kMarks };

}  // namespace

StepRunner::StepRunner(Model& model, LossScaler& scaler, const AdamWHyper& hyper, bool use_graphs)
    : model_(model),
      backend_(model.backend()),
      scaler_(scaler),
      hyper_(hyper),
      timer_(model.backend().make_timer(kMarks)),
      graphs_wanted_(use_graphs && model.backend().supports_graphs()) {}

StepRunner::~StepRunner() = default;

std::string StepRunner::note() const {
  std::string out;
  auto add = [&out](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
  if (capture_failed_) add("CUDA graph capture failed, steps run eagerly: " + capture_error_);
  if (graphs_wanted_ && !capture_failed_ && state_ != State::Replay) {
    add("no graph captured: the first " + std::to_string(kEagerStepsBeforeCapture) +
        " step(s) run eagerly before the capture");
  }
  if (!phases_timed_) add("forward/backward/optimizer not timed: " + timing_error_);
  if (!count_error_.empty()) add("kernel launches not counted: " + count_error_);
  return out;
}

// The device work of one step, the same calls whether they run now or are
// recorded into a graph.
void StepRunner::enqueue_work() {
  model_.forward();
  timer_->record(kForwardDone);
  model_.backward_pass();
  timer_->record(kBackwardDone);
  model_.optimizer_pass();
}

void StepRunner::capture_and_replay() {
  try {
    backend_.begin_capture();
    enqueue_work();
    launches_ = backend_.end_capture(/*instantiate=*/true);
    backend_.replay();
    state_ = State::Replay;
    return;
  } catch (const std::exception& e) {
    // Nothing recorded has run: discard the recording, clear the error state
    // and run this step (and every later one) eagerly.
    backend_.abort_capture();
    capture_failed_ = true;
    capture_error_ = e.what();
    launches_.reset();
  }
  state_ = State::Eager;
  enqueue_work();
}

void StepRunner::count_launches() {
  // After a failed capture the same work would only fail again.
  if (launches_ || capture_failed_ || !backend_.supports_graphs()) return;
  try {
    backend_.begin_capture();
    enqueue_work();
    launches_ = backend_.end_capture(/*instantiate=*/false);
  } catch (const std::exception& e) {
    backend_.abort_capture();  // the count stays unknown; nothing ran
    launches_.reset();
    count_error_ = e.what();
  }
}

StepRecord StepRunner::run(const std::vector<std::int32_t>& rows) {
  // Inputs of this step, copied before its work in stream order (and outside
  // any graph, which reads them from the same fixed buffers at each replay).
  model_.set_batch(rows);
  const double scale = scaler_.scale();
  // Like GradScaler, a skipped update does not advance AdamW's step count.
  hyper_.step = applied_updates_ + 1;
  model_.stage_step(static_cast<float>(scale), scaler_.enabled(), hyper_);

  timer_->record(kStart);
  switch (state_) {
    case State::Replay:
      backend_.replay();
      break;
    case State::CaptureNext:
      capture_and_replay();
      break;
    case State::Eager:
      enqueue_work();
      break;
  }
  timer_->record(kEnd);
  ++steps_run_;
  if (graphs_wanted_ && !capture_failed_ && state_ == State::Eager &&
      steps_run_ >= kEagerStepsBeforeCapture) {
    state_ = State::CaptureNext;
  }

  StepRecord r;
  r.loss = model_.loss();  // waits for the step to finish
  r.skipped = scaler_.update(model_.overflowed());
  r.loss_scale = scale;
  if (!r.skipped) ++applied_updates_;
  r.ms = timer_->elapsed_ms(kStart, kEnd);
  if (phases_timed_) {
    try {
      r.forward_ms = timer_->elapsed_ms(kStart, kForwardDone);
      r.backward_ms = timer_->elapsed_ms(kForwardDone, kBackwardDone);
      r.optimizer_ms = timer_->elapsed_ms(kBackwardDone, kEnd);
    } catch (const RuntimeFailure& e) {
      // Only the marks inside a graph can fail; the whole step stays timed.
      phases_timed_ = false;
      timing_error_ = e.what();
    }
  }
  if (!phases_timed_) {
    r.forward_ms = r.backward_ms = r.optimizer_ms = std::numeric_limits<double>::quiet_NaN();
  }
  return r;
}

}  // namespace tinyllama
