#pragma once
// Training steps: the batch and the step's scalars copied in, forward,
// backward (with fp16's overflow scan) and the optimizer enqueued -- eagerly,
// or as one replay of a CUDA graph captured from those same calls -- then
// the loss read back and the loss scale updated. The trainer and the GPU
// tests share it, so the tests exercise the trainer's capture path.
//
// launch() enqueues a step and finish() waits for the oldest one, so the
// host can enqueue step n+1 while the device still runs step n: the host's
// work between steps (the next batch, the launch itself, reading the loss)
// then overlaps the device's, as in a PyTorch loop that does not call
// .item() every step. Each step in flight has its own graph slot, timer
// marks and loss readback. run() is launch() then finish().
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/model.h"
#include "train/loss_scaler.h"
#include "train/trainer.h"

namespace tinyllama {

class StepRunner {
 public:
  // Eager steps before the capture: the first step settles everything done
  // once on first use (cuBLASLt's heuristic and descriptors, lazy module
  // loading), none of which may happen inside a capture.
  static constexpr int kEagerStepsBeforeCapture = 1;

  // Captures and replays the step when the model's plan says Graph (the
  // plan was resolved for a backend that can). hyper: AdamW's constants and
  // learning rate; the step count is the runner's. The scaler decides the
  // loss scale of each step and learns of its overflows.
  StepRunner(Model& model, LossScaler& scaler, const AdamWHyper& hyper);
  ~StepRunner();
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;

  // Trains one step on `rows` (batch rows of seq+1 tokens) and waits for its
  // loss. Returns the loss, timings, loss scale and whether fp16 skipped the
  // update; the caller numbers the step. With graphs, the step after the
  // eager ones is captured (once per graph slot) and replayed, and every
  // later step replays it; a capture that fails leaves every step eager
  // (capture_failed()). Nothing may be in flight.
  StepRecord run(const std::vector<std::int32_t>& rows);

  // Enqueues one step on `rows` without waiting for it; requires
  // can_launch(). Throws std::logic_error otherwise.
  // stop_vote (data parallel): this rank asks the run to stop; the record
  // of the step says whether any rank did (StepRecord::stop_agreed).
  void launch(const std::vector<std::int32_t>& rows, bool stop_vote = false);
  // Waits for the oldest step in flight and returns its record (as run()
  // does). Throws std::logic_error when none is in flight.
  StepRecord finish();
  int in_flight() const { return static_cast<int>(in_flight_.size()); }
  // Whether launch() may be called now: fewer than max_in_flight() steps in
  // flight, and none at all before a capture (it records from an idle stream).
  bool can_launch() const;
  // Steps that may be in flight at once: kGraphSlots, or 1 with loss scaling
  // (fp16), where each step's loss scale and AdamW step count depend on
  // whether the step before it overflowed.
  int max_in_flight() const;

  // Whether steps now run as replays of a captured graph.
  bool replaying() const { return state_ == State::Replay; }
  // Whether capturing was tried and failed (the one-line reason is in note()).
  bool capture_failed() const { return capture_failed_; }
  // Why graphs were asked for and steps still run eagerly, or why the phase
  // split is missing; empty when neither.
  std::string note() const;

  // Launches of one step's device work (forward, backward, optimizer; not the
  // batch and scalar copies before it), counted on its captured graph. Empty
  // until a graph has been captured or count_launches() has run, and on a
  // backend without graphs.
  const std::optional<GraphStats>& launches() const { return launches_; }
  // For steps that run eagerly on a backend that can capture: records one
  // step's work without running it, only to count its launches. Leaves the
  // model untouched; a failure only leaves launches() empty (and says so in
  // note()). Does nothing after a failed capture. Nothing may be in flight.
  void count_launches();

  // Whether forward/backward/optimizer times are measured (they are NaN in
  // the records otherwise); false only if the timing events inside a graph
  // cannot be read, in which case whole steps are still timed.
  bool phases_timed() const { return phases_timed_; }
  // AdamW updates applied so far (fp16's skipped steps do not count).
  int applied_updates() const { return applied_updates_; }
  // A resumed run continues AdamW's step count from its checkpoint. Nothing
  // may be in flight.
  void restore_applied_updates(int n);
  // The learning rate of the steps launched from now on (the schedule's
  // value for the next step; train/lr_schedule.h). Staged per step like the
  // step count, so a replayed graph uses it.
  void set_learning_rate(double lr) { learning_rate_ = lr; }

 private:
  enum class State { Eager, CaptureNext, Replay };
  // A step enqueued and not yet finished.
  struct InFlight {
    int slot = 0;
    double loss_scale = 1.0;
    double lr = 0;  // the learning rate its update used
  };
  void enqueue_work(int slot);
  void capture_and_replay(int slot);
  void require_idle(const char* what) const;

  Model& model_;
  Backend& backend_;
  LossScaler& scaler_;
  AdamWHyper hyper_;
  std::unique_ptr<EventTimer> timer_;                     // kMarks marks per slot
  std::vector<std::unique_ptr<HostReadback>> readbacks_;  // one per slot
  std::vector<std::unique_ptr<HostReadback>> votes_;      // data parallel: one per slot
  std::vector<std::unique_ptr<HostReadback>> norms_;      // the gradient norm: one per slot
  double learning_rate_ = 0;                              // of the next launch
  std::deque<InFlight> in_flight_;
  bool graphs_wanted_;
  State state_ = State::Eager;
  int steps_run_ = 0;
  bool choices_adopted_ = false;  // Model::adopt_rank0_tuning ran (after the first step)
  bool adopting_choices() const;
  int applied_updates_ = 0;
  bool capture_failed_ = false;
  std::string capture_error_;
  // TINYLLAMA_GRAPH_CAPTURE=0: the captured plan's steps run eagerly (the
  // same streams and branches, no graph), to measure what capture changes.
  bool capture_skipped_ = false;
  bool phases_timed_ = true;
  std::string timing_error_;
  std::string count_error_;
  std::optional<GraphStats> launches_;
  // Host clock (ms) at the timer's four marks of each slot, taken as the
  // host issues them, never synchronised: StepRecord::host_*_ms.
  double host_marks_[kGraphSlots][4] = {};
};

}  // namespace tinyllama
