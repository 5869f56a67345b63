#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iostream>
#include <limits>
#include <optional>
#include <string>

#include "core/errors.h"
#include "data/run_tokenizer.h"
#include "io/hf_directory.h"
#include "io/hf_weights.h"
#include "io/safetensors.h"
#include "model/init.h"
#include "prof/clock_sampler.h"
#include "prof/profiler.h"
#include "train/backend_factory.h"
#include "train/checkpoint.h"
#include "train/interrupt.h"
#include "train/loss_scaler.h"
#include "train/memory_profile.h"
#include "train/run_data.h"
#include "train/run_dump.h"
#include "train/run_resume.h"
#include "train/step_runner.h"

namespace tinyllama {
namespace {

void fill_averages(TrainSummary& s, const TrainOptions& opts) {
  if (s.steps.empty()) return;
  const double n = static_cast<double>(s.steps.size());
  for (const StepRecord& r : s.steps) {
    s.ms_per_step += r.ms / n;
    s.forward_ms += r.forward_ms / n;
    s.backward_ms += r.backward_ms / n;
    s.optimizer_ms += r.optimizer_ms / n;
  }
  s.final_loss = s.steps.back().loss;
  const int micro = opts.plan.update.accumulation;
  s.samples_per_s = s.ranks * opts.shape.batch * micro / (s.ms_per_step / 1e3);
  s.tokens_per_s_per_rank =
      static_cast<double>(opts.shape.tokens()) * micro / (s.ms_per_step / 1e3);
  s.tokens_per_s = s.ranks * s.tokens_per_s_per_rank;
}

void tell(const NoteCallback& on_note, const std::string& line) {
  if (on_note) on_note(line);
}

// The summary's fields known once the model is built.
TrainSummary initial_summary(const StepPlan& plan, Collectives* comm, int world,
                             const Backend& backend, const Model& model) {
  TrainSummary summary;
  summary.ranks = world;
  summary.parallel =
      plan.parallel.describe() + (comm != nullptr ? " over " + comm->description() : std::string());
  if (plan.parallel.gemm_sm_margin > 0) {
    summary.parallel += "; the GEMMs beside the exchange leave it " +
                        std::to_string(plan.parallel.gemm_sm_margin) + " SMs";
  }
  summary.device_name = backend.device_description();
  summary.memory = model.memory();
  for (const ParamSlot& s : model.layout().slots()) summary.parameter_count += s.numel();
  return summary;
}

// The message of a run stopped by a non-finite loss.
std::string divergence_message(const std::string& step, double loss, double last_finite,
                               const std::string& last_finite_step) {
  char last[64];
  std::snprintf(last, sizeof last, "%g", last_finite);
  return "diverged at " + step + ": loss " + (std::isnan(loss) ? "nan" : "inf") +
         " (last finite loss " + (std::isnan(last_finite) ? std::string("none") : last) + " at " +
         last_finite_step + "); try a lower --learning-rate";
}

// What the run has in hand while its steps go: everything train() built.
struct RunParts {
  const TrainOptions& opts;
  RunData& data;
  Backend& backend;
  Model& model;
  MemoryProfile& memory_profile;
  RunDump& dump;
  LossScaler& scaler;
  const LrSchedule& schedule;
  StepRunner& runner;
  prof::Profiler* profiler;
  prof::ClockSampler* clock_sampler;
  Collectives* comm;
  int rank;
  int world;
  bool writer;
};

// The loop over the steps, from `start` to warm-up + timed steps.
//
// Steps are enqueued ahead: step n+1 is launched before step n's loss is
// read, so the host's work overlaps the device's. The loop waits for every
// step in flight where the timing regime changes -- when the warm-up ends,
// and before the first step after the profiled ones (the profiler must
// stop before the baseline steps it is compared with start) -- and keeps a
// single step in flight while --dump-dir reads gradients after step 1.
class StepLoop {
 public:
  StepLoop(const RunParts& p, TrainSummary& summary, int start, const StepCallback& on_step,
           const NoteCallback& on_note, const WarmupCallback& on_warmup)
      : p_(p),
        opts_(p.opts),
        summary_(summary),
        on_step_(on_step),
        on_note_(on_note),
        on_warmup_(on_warmup),
        total_(opts_.warmup_steps + opts_.num_steps),
        start_(start),
        last_checkpoint_(start),
        planned_bytes_(static_cast<double>(summary.memory.total())),
        // --log-logit-stats reads the step's activations after it: one in flight.
        depth_(p.dump.enabled() || opts_.log_logit_stats ? 1 : p.runner.max_in_flight()) {}

  // Runs the steps, then a last evaluation and checkpoint; returns the
  // clock's report over the timed steps (when sampled).
  std::optional<prof::ClockReport> run() {
    const std::int64_t launched_count = run_steps();
    std::optional<prof::ClockReport> clocks;
    if (p_.clock_sampler) clocks = p_.clock_sampler->stop();
    // Under --profile the clock is reported with the profile (summary.json).
    if (!p_.profiler) summary_.clocks = clocks;
    // A last validation loss for the finished run (not for one interrupted:
    // the user wants it to stop).
    if (p_.data.has_validation() && summary_.stop == TrainSummary::Stop::Completed &&
        !summary_.steps.empty()) {
      evaluate(summary_.steps.back().step);
    }
    const int steps_done = start_ + static_cast<int>(launched_count);
    summary_.steps_done = steps_done;
    if (!opts_.checkpoint_dir.empty() && summary_.stop != TrainSummary::Stop::Diverged &&
        steps_done > last_checkpoint_) {
      checkpoint(steps_done);
    }
    summary_.wall_ms_per_step = wall_ms_per_step();
    return clocks;
  }

 private:
  struct Launched {
    int step = 0;
    bool timed = false;
    bool profiled = false;
    std::vector<std::int32_t> rows;  // kept for --dump-dir
  };

  // Runs the steps; returns how many this process launched.
  std::int64_t run_steps() {
    for (int i = start_; i < total_ && summary_.stop == TrainSummary::Stop::Completed; ++i) {
      const bool timed = i >= opts_.warmup_steps;
      const int step = i - opts_.warmup_steps + 1;
      if (!between_steps(i, step)) break;
      // The profiled steps, the counter step (when asked for) and the
      // baseline each start with nothing of the step before in flight.
      const bool regime_changes =
          step == 1 || (p_.profiler && (step == opts_.profile_steps + 1 ||
                                        step == p_.profiler->window_steps() + 1));
      while (p_.runner.in_flight() > 0 &&
             (regime_changes || p_.runner.in_flight() >= depth_ || !p_.runner.can_launch())) {
        complete_oldest();
      }
      if (baseline(step) && (!baseline(step - 1) || i == start_))
        wall_start_ = std::chrono::steady_clock::now();
      launch(i, step, timed);
    }
    drain();
    return launched_count_;
  }

  void drain() {
    while (p_.runner.in_flight() > 0) complete_oldest();
  }

  void evaluate(int after_step) {
    const double loss = p_.data.evaluate(p_.model, opts_.eval_steps, opts_.shape.batch);
    summary_.evals.push_back({after_step, loss});
    char line[128];
    std::snprintf(line, sizeof line, "eval after step %d/%d | val loss %.4f (%d batches)",
                  after_step, opts_.num_steps, loss, opts_.eval_steps);
    tell(on_note_, line);
  }

  void checkpoint(int steps_done) {
    CheckpointState c;
    c.steps_done = steps_done;
    c.next_lr = p_.schedule.at(std::min(steps_done, total_ - 1));
    c.applied_updates = p_.runner.applied_updates();
    c.loss_scale = p_.scaler.scale();
    c.clean_steps = p_.scaler.clean_steps();
    c.sampler = p_.data.train().state();
    c.tuning = p_.backend.tuning_state();
    if (!p_.writer) {
      gather_checkpoint_state(p_.model);  // rank 0's save reads the sharded state
      last_checkpoint_ = steps_done;
      return;
    }
    try {
      summary_.checkpoint =
          save_checkpoint(opts_.checkpoint_dir, p_.model, c, opts_, opts_.keep_checkpoints);
      tell(on_note_, "checkpoint " + summary_.checkpoint);
    } catch (const RuntimeFailure& e) {
      summary_.save_error = std::string("--checkpoint-dir: ") + e.what();
    }
    last_checkpoint_ = steps_done;
  }

  // The wall-clock time per baseline step (after the profiled ones).
  double wall_ms_per_step() const {
    const int wall_steps = std::max(0, static_cast<int>(summary_.steps.size()) -
                                           (p_.profiler ? p_.profiler->window_steps() : 0));
    const double wall_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_start_)
            .count();
    return wall_steps > 0 ? wall_ms / wall_steps : 0.0;
  }

  std::string step_name(int step) const {
    return step >= 1 ? "step " + std::to_string(step) + "/" + std::to_string(opts_.num_steps)
                     : "warm-up step " + std::to_string(step + opts_.warmup_steps) + "/" +
                           std::to_string(opts_.warmup_steps);
  }

  // Data parallel: a signal reaches the ranks at different steps, and a
  // rank that stopped alone would leave the others waiting in a collective;
  // each step carries every rank's vote, and the run stops after the first
  // step a rank voted in, on every rank alike.
  bool stop_now() const { return p_.comm != nullptr ? stop_agreed_ : interrupt_signal() != 0; }

  bool baseline(int step) const {
    return step >= 1 && (!p_.profiler || step > p_.profiler->window_steps());
  }

  // Between steps: a signal, a checkpoint or an evaluation waits for the
  // steps in flight (their batches were drawn: the sampler's state is
  // that of the steps done once they finish). False: the loop stops.
  bool between_steps(int i, int step) {
    if (stop_now()) {
      drain();
      if (summary_.stop == TrainSummary::Stop::Completed) {
        summary_.stop = TrainSummary::Stop::Interrupted;
        // A rank the signal did not reach stops as if sent SIGTERM.
        summary_.signal = interrupt_signal() != 0 ? interrupt_signal() : SIGTERM;
      }
      return false;
    }
    if (!opts_.checkpoint_dir.empty() && opts_.checkpoint_every > 0 && i > start_ &&
        i % opts_.checkpoint_every == 0) {
      drain();
      if (summary_.stop != TrainSummary::Stop::Completed) return false;
      checkpoint(i);
    }
    if (p_.data.has_validation() && step > 1 && (step - 1) % opts_.eval_every == 0) {
      drain();
      if (summary_.stop != TrainSummary::Stop::Completed) return false;
      evaluate(step - 1);
    }
    return true;
  }

  // Every rank draws the global batch (the same seeded sequence) and keeps
  // its own block of rows: the ranks see disjoint shards of each batch, and
  // together the batch one process would train on with --batch-size B*N.
  std::vector<std::int32_t> rank_rows(std::vector<std::int32_t> global) const {
    if (p_.world == 1) return global;
    const std::size_t per_rank = global.size() / static_cast<std::size_t>(p_.world);
    const auto first = global.begin() + static_cast<std::ptrdiff_t>(per_rank * p_.rank);
    return std::vector<std::int32_t>(first, first + static_cast<std::ptrdiff_t>(per_rank));
  }

  void launch(int i, int step, bool timed) {
    // Every micro-batch of the step (UpdateRecipe::accumulation), drawn at once.
    const int rows = opts_.shape.batch * p_.world * opts_.plan.update.accumulation;
    Launched l{step, timed, false, rank_rows(p_.data.train().next_batch(rows))};
    p_.runner.set_learning_rate(p_.schedule.at(i));
    if (p_.profiler) l.profiled = p_.profiler->begin_step(timed);
    if (p_.clock_sampler && timed) p_.clock_sampler->start();  // a no-op once started
    p_.runner.launch(l.rows, interrupt_signal() != 0);
    if (p_.profiler) p_.profiler->end_launch();
    if (p_.runner.capture_failed() && !capture_failure_told_) {
      capture_failure_told_ = true;
      std::cerr << "note: " << p_.runner.note() << std::endl;  // once, when it happens
    }
    launched_.push_back(std::move(l));
    ++launched_count_;
  }

  void complete_oldest() {
    StepRecord r = p_.runner.finish();
    if (opts_.log_logit_stats) r.logits = p_.model.logit_stats();
    stop_agreed_ = stop_agreed_ || r.stop_agreed;
    Launched l = std::move(launched_.front());
    launched_.pop_front();
    r.step = l.step;
    if (summary_.stop == TrainSummary::Stop::Diverged) return;  // a step launched after it
    if (std::isfinite(r.loss)) {
      last_finite_ = r.loss;
      last_finite_step_ = step_name(l.step);
    } else if (!r.skipped) {  // fp16 skips a step whose gradients overflowed, and goes on
      summary_.stop = TrainSummary::Stop::Diverged;
      summary_.stop_message =
          divergence_message(step_name(l.step), r.loss, last_finite_, last_finite_step_);
    }
    if (p_.profiler) p_.profiler->end_step(l.timed, l.profiled, r.ms);
    const double device_peak = static_cast<double>(p_.backend.device_peak_used_bytes());
    summary_.peak_mb = std::max(summary_.peak_mb, planned_bytes_ / 1e6);
    summary_.device_used_peak_mb = std::max(summary_.device_used_peak_mb, device_peak / 1e6);
    p_.memory_profile.sample("after " + step_name(l.step));
    if (!l.timed) {
      r.step = l.step + opts_.warmup_steps;
      if (on_warmup_) on_warmup_(r, opts_);
      return;
    }
    p_.dump.batch(l.step, l.rows, opts_.shape);
    if (l.step == 1) p_.dump.gradients(p_.model, r.loss_scale);
    summary_.steps.push_back(r);
    if (on_step_) on_step_(r, opts_, summary_);
  }

  const RunParts& p_;
  const TrainOptions& opts_;
  TrainSummary& summary_;
  const StepCallback& on_step_;
  const NoteCallback& on_note_;
  const WarmupCallback& on_warmup_;
  const int total_;
  const int start_;
  int last_checkpoint_;
  const double planned_bytes_;
  const int depth_;
  std::deque<Launched> launched_;
  std::int64_t launched_count_ = 0;
  bool capture_failure_told_ = false;
  // The divergence guard: the last finite loss, for the message.
  double last_finite_ = std::numeric_limits<double>::quiet_NaN();
  std::string last_finite_step_ = "none";
  bool stop_agreed_ = false;
  std::chrono::steady_clock::time_point wall_start_;
};

// --profile: records the first profile_steps timed steps (src/prof/profiler.h).
std::unique_ptr<prof::Profiler> make_profiler(const TrainOptions& opts, bool writer, Model& model,
                                              Backend& backend) {
  if (!opts.profile || !writer) return nullptr;
  return std::make_unique<prof::Profiler>(
      prof::ProfileSettings{opts.profile_dir, opts.profile_steps, opts.warmup_steps,
                            opts.profile_api_calls, opts.profile_counters, opts.explain_kernel},
      model, backend);
}

// The reports written after the steps: the profile and the memory profile.
void finish_reports(prof::Profiler* profiler, const std::optional<prof::ClockReport>& clocks,
                    MemoryProfile& memory_profile, TrainSummary& summary) {
  if (profiler) {
    summary.profile_report = profiler->finish(
        {summary.ms_per_step, summary.device_used_peak_mb, clocks ? &*clocks : nullptr});
  }
  if (memory_profile.enabled()) {
    try {
      summary.memory_profile_report = memory_profile.write();
    } catch (const RuntimeFailure& e) {
      summary.save_error = e.what();
    }
  }
}

// How the steps ran: eager or a replayed graph, and its launches.
void record_execution(StepRunner& runner, TrainSummary& summary) {
  // An eager run's launches are counted on a capture made only for that.
  if (!runner.replaying()) runner.count_launches();
  summary.execution = runner.replaying() ? "cuda_graph" : "eager";
  summary.execution_note = runner.note();
  summary.launches = runner.launches();
  summary.phases_timed = runner.phases_timed();
}

// --save-weights and --export-hf, by the writing rank. A failed save is
// reported in summary.save_error, after the summary and the --json report.
void save_final_weights(const TrainOptions& opts, const ParamLayout& layout,
                        const std::vector<double>& final_weights,
                        const std::optional<HfTokenizer>& tokenizer, TrainSummary& summary) {
  if (!opts.save_weights.empty() && summary.stop != TrainSummary::Stop::Diverged) {
    try {
      save_hf_weights(opts.save_weights, layout, final_weights);
    } catch (const RuntimeFailure& e) {
      summary.save_error = std::string("--save-weights: ") + e.what();
    }
  }
  if (!opts.export_hf.empty() && summary.stop != TrainSummary::Stop::Diverged) {
    try {
      export_hf_directory(opts.export_hf, layout, final_weights, opts.shape.seq,
                          tokenizer ? &*tokenizer : nullptr);
    } catch (const RuntimeFailure& e) {
      const std::string error = std::string("--export-hf: ") + e.what();
      summary.save_error = summary.save_error.empty() ? error : summary.save_error + "; " + error;
    }
  }
}

}  // namespace

TrainSummary train(const TrainOptions& opts, const StepCallback& on_step,
                   const NoteCallback& on_note, const WarmupCallback& on_warmup,
                   Collectives* collectives) {
  opts.model.validate();
  const StepPlan& plan = opts.plan;
  if (plan.level.empty()) throw std::logic_error("train: the plan is not resolved (resolve_run)");
  // The data first: a missing file or a bad token fails before any allocation.
  RunData data(opts);
  tell(on_note, "data | " + data.description());
  // The tokenizer the shards or --init-from name, for --export-hf.
  const std::optional<HfTokenizer> tokenizer =
      run_tokenizer(opts.data, opts.init_from, opts.model.vocab_size);
  std::unique_ptr<Backend> backend = make_backend(plan.device, plan.precision);
  Collectives* comm = plan.parallel.enabled ? collectives : nullptr;
  const int rank = comm != nullptr ? comm->rank() : 0;
  const int world = comm != nullptr ? comm->world() : 1;
  const bool writer = rank == 0;  // the one rank that writes files
  Model model(opts.model, opts.shape, plan, *backend, comm);
  MemoryProfile memory_profile(opts, writer);
  memory_profile.sample("after setup");
  // The memory check refused by the plan's figure: the backend must have
  // allocated exactly that, or the reported peak would be wrong.
  if (backend->workspace_bytes() != plan.workspace_bytes()) {
    throw RuntimeFailure("internal: the " + backend->name() + " backend allocated " +
                         std::to_string(backend->workspace_bytes()) +
                         " workspace bytes, the plan " + std::to_string(plan.workspace_bytes()));
  }
  TrainSummary summary = initial_summary(plan, comm, world, *backend, model);

  // Exercise fault broken-init (model/faults.h): the init's draws unscaled.
  const double init_stddev = opts.faults.broken_init ? 1.0 : kInitStddev;
  model.set_params(opts.init_from.empty() ? initial_weights(model.layout(), opts.seed, init_stddev)
                                          : load_hf_weights(opts.init_from, model.layout()));
  RunDump dump(writer ? opts.dump_dir : std::string());
  dump.initial_weights(model);

  LossScaler scaler(plan.loss_scaling == LossScaling::Dynamic);
  // The learning rate of each step is the schedule's (train/lr_schedule.h).
  const LrSchedule schedule = lr_schedule(opts);
  // Eager steps, or one captured step replayed (plan.ops.execution).
  StepRunner runner(model, scaler, adamw_hyper(opts));

  const int total = opts.warmup_steps + opts.num_steps;
  // Steps done before this process (--resume).
  const int start = opts.resume.empty() ? 0
                                        : resume_run(opts, total, data, *backend, model, scaler,
                                                     runner, summary, on_note);
  if (!opts.checkpoint_dir.empty() && writer) {
    std::filesystem::create_directories(opts.checkpoint_dir);
  }
  std::unique_ptr<prof::Profiler> profiler = make_profiler(opts, writer, model, *backend);
  // The clock over the timed steps, beside their times (and in the
  // profile's summary under --profile).
  std::unique_ptr<prof::ClockSampler> clock_sampler =
      writer && backend->name() == "cuda" ? prof::ClockSampler::for_current_gpu() : nullptr;

  const RunParts parts{opts,   data,     *backend, model,          memory_profile,      dump,
                       scaler, schedule, runner,   profiler.get(), clock_sampler.get(), comm,
                       rank,   world,    writer};
  StepLoop loop(parts, summary, start, on_step, on_note, on_warmup);
  const std::optional<prof::ClockReport> clocks = loop.run();
  dump.finish();
  fill_averages(summary, opts);
  finish_reports(profiler.get(), clocks, memory_profile, summary);
  record_execution(runner, summary);
  // Diverged weights are worth nothing. The weights are read on every rank
  // (a gather under ZeRO-1), written by one.
  const bool keep_weights = (!opts.save_weights.empty() || !opts.export_hf.empty()) &&
                            summary.stop != TrainSummary::Stop::Diverged;
  const std::vector<double> final_weights = keep_weights ? model.params() : std::vector<double>();
  if (!writer) return summary;
  save_final_weights(opts, model.layout(), final_weights, tokenizer, summary);
  return summary;
}

}  // namespace tinyllama
