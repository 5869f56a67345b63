#include "train/step_runner.h"

#include <chrono>
#include <cstdlib>
#include <exception>
#include <limits>
#include <stdexcept>

#include "core/errors.h"

namespace tinyllama {
namespace {

// Timer marks around the phases of a step. kStart and kEnd are recorded
// outside any graph, before the step's input copies and after its loss
// readback; the two inside become event-record nodes of a captured graph.
// kStart completes when the step before it has (or at once on an idle
// device), so a step's time is the device time it adds to the run: the
// graph's launch latency counts when nothing hides it. The input copies
// count in the forward phase, the loss readback in the optimizer's.
enum Mark { kStart, kForwardDone, kBackwardDone, kEnd, kMarks };

// Each graph slot has its own marks, so two steps in flight keep their times.
int mark(int slot, Mark m) {
  return slot * kMarks + m;
}

double host_now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StepRunner::StepRunner(Model& model, LossScaler& scaler, const AdamWHyper& hyper)
    : model_(model),
      backend_(model.backend()),
      scaler_(scaler),
      hyper_(hyper),
      timer_(model.backend().make_timer(kMarks * kGraphSlots)),
      graphs_wanted_(model.plan().captured()) {
  learning_rate_ = hyper.lr;
  const char* capture = std::getenv("TINYLLAMA_GRAPH_CAPTURE");
  capture_skipped_ = graphs_wanted_ && capture != nullptr && std::string(capture) == "0";
  if (graphs_wanted_ && !backend_.supports_graphs()) {
    throw std::logic_error("StepRunner: the plan captures graphs, the " + backend_.name() +
                           " backend cannot (a plan resolved for another device)");
  }
  for (int slot = 0; slot < kGraphSlots; ++slot) {
    readbacks_.push_back(backend_.make_readback(model.losses_bytes()));
    if (model.computes_grad_norm()) norms_.push_back(backend_.make_readback(sizeof(float)));
    if (model.collectives() != nullptr) {
      votes_.push_back(backend_.make_readback(sizeof(std::int32_t)));
    }
  }
}

StepRunner::~StepRunner() = default;

std::string StepRunner::note() const {
  std::string out;
  auto add = [&out](const std::string& s) { out += (out.empty() ? "" : "; ") + s; };
  if (capture_failed_) add("CUDA graph capture failed, steps run eagerly: " + capture_error_);
  if (capture_skipped_) add("TINYLLAMA_GRAPH_CAPTURE=0: the captured plan's steps run eagerly");
  if (graphs_wanted_ && !capture_failed_ && !capture_skipped_ && state_ != State::Replay) {
    add("no graph captured: the first " + std::to_string(kEagerStepsBeforeCapture) +
        " step(s) run eagerly before the capture");
  }
  if (!phases_timed_) add("forward/backward/optimizer not timed: " + timing_error_);
  if (!count_error_.empty()) add("kernel launches not counted: " + count_error_);
  if (model_.micro_batches() > 1) {
    add("forward_ms holds the first " + std::to_string(model_.micro_batches() - 1) +
        " micro-batches' backward passes too (" + std::to_string(model_.micro_batches()) +
        " micro-batches per step)");
  }
  return out;
}

int StepRunner::max_in_flight() const {
  return scaler_.enabled() ? 1 : kGraphSlots;
}

bool StepRunner::can_launch() const {
  if (in_flight() >= max_in_flight()) return false;
  // A capture, and the ranks' adoption of rank 0's timed choices before
  // it, start from an idle stream.
  return (state_ != State::CaptureNext && !adopting_choices()) || in_flight_.empty();
}

bool StepRunner::adopting_choices() const {
  return steps_run_ == kEagerStepsBeforeCapture && !choices_adopted_;
}

void StepRunner::require_idle(const char* what) const {
  if (!in_flight_.empty()) {
    throw std::logic_error(std::string("StepRunner::") + what + " with steps in flight");
  }
}

// The device work of one step, the same calls whether they run now or are
// recorded into a graph; the phase marks are the slot's.
// With gradient accumulation the micro-batches run one after the other,
// each forward then backward: the forward mark falls after the last
// micro-batch's forward, so "forward" holds every earlier micro-batch's
// whole pass too (the phase split is not a forward/backward split then;
// note() says so).
void StepRunner::enqueue_work(int slot) {
  const int micro = model_.micro_batches();
  for (int m = 0; m < micro; ++m) {
    model_.select_micro_batch(m);
    model_.forward_pass();
    if (m + 1 == micro) {
      timer_->record(mark(slot, kForwardDone));
      host_marks_[slot][kForwardDone] = host_now_ms();
    }
    model_.backward_pass(/*update_layers=*/true);
    model_.accumulate_gradients();
  }
  timer_->record(mark(slot, kBackwardDone));
  host_marks_[slot][kBackwardDone] = host_now_ms();
  model_.optimizer_pass();
}

void StepRunner::capture_and_replay(int slot) {
  try {
    // One graph per slot, identical but for the timer marks they record.
    for (int s = 0; s < kGraphSlots; ++s) {
      backend_.begin_capture();
      enqueue_work(s);
      const GraphStats stats = backend_.end_capture(/*instantiate=*/true, s);
      if (s == 0) launches_ = stats;
    }
    backend_.replay(slot);
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
  enqueue_work(slot);
}

void StepRunner::count_launches() {
  require_idle("count_launches");
  // After a failed capture the same work would only fail again.
  if (launches_ || capture_failed_ || !backend_.supports_graphs()) return;
  try {
    backend_.begin_capture();
    enqueue_work(0);
    launches_ = backend_.end_capture(/*instantiate=*/false, 0);
  } catch (const std::exception& e) {
    backend_.abort_capture();  // the count stays unknown; nothing ran
    launches_.reset();
    count_error_ = e.what();
  }
}

void StepRunner::restore_applied_updates(int n) {
  require_idle("restore_applied_updates");
  applied_updates_ = n;
}

StepRecord StepRunner::run(const std::vector<std::int32_t>& rows) {
  require_idle("run");
  launch(rows);
  return finish();
}

void StepRunner::launch(const std::vector<std::int32_t>& rows, bool stop_vote) {
  if (!can_launch()) throw std::logic_error("StepRunner::launch: no free slot (finish() first)");
  if (adopting_choices()) {
    // The first step timed each rank's GEMMs on its own GPU: from here every
    // rank runs rank 0's algorithms, as a run resumed from rank 0's
    // checkpoint will (a no-op on one rank).
    model_.adopt_rank0_tuning();
    choices_adopted_ = true;
  }
  const int slot = steps_run_ % kGraphSlots;
  // Everything the step puts on the stream lies between its first and last
  // mark -- the input copies, the work, the loss readback -- so steps timed
  // back to back add up to the run's device time.
  timer_->record(mark(slot, kStart));
  host_marks_[slot][kStart] = host_now_ms();
  // Inputs of this step, copied before its work in stream order (and outside
  // any graph, which reads them from the same fixed buffers at each replay).
  model_.set_batch(rows);
  InFlight step{slot, scaler_.scale(), learning_rate_};
  // Like GradScaler, a skipped update does not advance AdamW's step count.
  // Only fp16 skips, and it keeps one step in flight, so every step still in
  // flight here is an update that will be applied.
  hyper_.step = applied_updates_ + in_flight() + 1;
  hyper_.lr = static_cast<float>(learning_rate_);
  model_.stage_step(static_cast<float>(step.loss_scale), scaler_.enabled(), hyper_);
  if (!votes_.empty()) model_.stage_stop_vote(stop_vote);

  switch (state_) {
    case State::Replay:
      backend_.replay(slot);
      break;
    case State::CaptureNext:
      capture_and_replay(slot);
      break;
    case State::Eager:
      enqueue_work(slot);
      break;
  }
  // A replay issues the whole step at once: its host time is the forward's.
  if (state_ == State::Replay) {
    host_marks_[slot][kForwardDone] = host_marks_[slot][kBackwardDone] = host_now_ms();
  }
  model_.enqueue_loss_readback(*readbacks_[static_cast<std::size_t>(slot)]);
  if (!norms_.empty()) model_.enqueue_grad_norm_readback(*norms_[static_cast<std::size_t>(slot)]);
  if (!votes_.empty()) model_.enqueue_stop_readback(*votes_[static_cast<std::size_t>(slot)]);
  timer_->record(mark(slot, kEnd));
  host_marks_[slot][kEnd] = host_now_ms();
  in_flight_.push_back(step);
  ++steps_run_;
  if (graphs_wanted_ && !capture_failed_ && !capture_skipped_ && state_ == State::Eager &&
      steps_run_ >= kEagerStepsBeforeCapture) {
    state_ = State::CaptureNext;
  }
}

StepRecord StepRunner::finish() {
  if (in_flight_.empty()) throw std::logic_error("StepRunner::finish: no step in flight");
  const InFlight step = in_flight_.front();
  in_flight_.pop_front();
  const int slot = step.slot;

  StepRecord r;
  r.loss = model_.mean_loss(*readbacks_[static_cast<std::size_t>(slot)]);  // waits for the step
  if (!votes_.empty()) r.stop_agreed = Model::stop_voted(*votes_[static_cast<std::size_t>(slot)]);
  if (!norms_.empty()) r.grad_norm = Model::grad_norm(*norms_[static_cast<std::size_t>(slot)]);
  r.lr = step.lr;
  // With loss scaling this is the only step in flight: the flag is its own.
  r.skipped = scaler_.update(model_.overflowed());
  r.loss_scale = step.loss_scale;
  if (!r.skipped) ++applied_updates_;
  r.ms = timer_->elapsed_ms(mark(slot, kStart), mark(slot, kEnd));
  if (phases_timed_) {
    try {
      r.forward_ms = timer_->elapsed_ms(mark(slot, kStart), mark(slot, kForwardDone));
      r.backward_ms = timer_->elapsed_ms(mark(slot, kForwardDone), mark(slot, kBackwardDone));
      r.optimizer_ms = timer_->elapsed_ms(mark(slot, kBackwardDone), mark(slot, kEnd));
    } catch (const RuntimeFailure& e) {
      // Only the marks inside a graph can fail; the whole step stays timed.
      phases_timed_ = false;
      timing_error_ = e.what();
    }
  }
  if (!phases_timed_) {
    r.forward_ms = r.backward_ms = r.optimizer_ms = std::numeric_limits<double>::quiet_NaN();
  }
  const double* host = host_marks_[slot];
  r.host_forward_ms = host[kForwardDone] - host[kStart];
  r.host_backward_ms = host[kBackwardDone] - host[kForwardDone];
  r.host_optimizer_ms = host[kEnd] - host[kBackwardDone];
  return r;
}

}  // namespace tinyllama
