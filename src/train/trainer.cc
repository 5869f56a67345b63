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
#include "train/step_runner.h"

namespace tinyllama {
namespace {

// A step's rows (every micro-batch's), [rows, seq + 1].
TensorData token_tensor(const std::vector<std::int32_t>& rows, int seq) {
  TensorData t;
  t.dtype = "I32";
  t.shape = {static_cast<std::int64_t>(rows.size()) / (seq + 1), seq + 1};
  t.bytes.resize(rows.size() * sizeof(std::int32_t));
  std::memcpy(t.bytes.data(), rows.data(), t.bytes.size());
  return t;
}

// --dump-dir: the initial weights, every timed batch and step 1's gradients,
// so an independent implementation can replay the run (tests/python).
class RunDump {
 public:
  explicit RunDump(std::string dir) : dir_(std::move(dir)) {
    if (!dir_.empty()) std::filesystem::create_directories(dir_);
  }
  bool enabled() const { return !dir_.empty(); }
  void initial_weights(const Model& m) const {
    if (enabled()) save_hf_weights(dir_ + "/init.safetensors", m.layout(), m.params());
  }
  void batch(int step, const std::vector<std::int32_t>& rows, BatchShape shape) {
    if (enabled())
      batches_.emplace_back("step" + std::to_string(step), token_tensor(rows, shape.seq));
  }
  // The gradients of the mean loss: fp16 runs hold them multiplied by the
  // loss scale in force, which is divided out here.
  void gradients(const Model& m, double loss_scale) const {
    if (enabled()) {
      std::vector<double> g = m.grads();
      for (double& x : g) x /= loss_scale;
      write_safetensors(dir_ + "/grads_step1.safetensors", to_hf_tensors(m.layout(), g, DType::F32),
                        {{"producer", "tinyllama"}, {kRopeLayoutKey, kRotateHalf}});
    }
  }
  void finish() const {
    if (enabled()) write_safetensors(dir_ + "/batches.safetensors", batches_);
  }

 private:
  std::string dir_;
  std::vector<std::pair<std::string, TensorData>> batches_;
};

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

}  // namespace

TrainSummary train(const TrainOptions& opts, const StepCallback& on_step,
                   const NoteCallback& on_note, const WarmupCallback& on_warmup,
                   Collectives* collectives) {
  opts.model.validate();
  const StepPlan& plan = opts.plan;
  if (plan.level.empty()) throw std::logic_error("train: the plan is not resolved (resolve_run)");
  auto note = [&](const std::string& line) {
    if (on_note) on_note(line);
  };
  // The data first: a missing file or a bad token fails before any allocation.
  RunData data(opts);
  note("data | " + data.description());
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

  TrainSummary summary;
  summary.ranks = world;
  summary.parallel =
      plan.parallel.describe() + (comm != nullptr ? " over " + comm->description() : std::string());
  summary.device_name = backend->device_description();
  summary.memory = model.memory();
  for (const ParamSlot& s : model.layout().slots()) summary.parameter_count += s.numel();
  const double planned_bytes = static_cast<double>(summary.memory.total());

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
  int start = 0;  // steps done before this process (--resume)
  if (!opts.resume.empty()) {
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
      const std::string why = backend->restore_tuning_state(c.tuning);
      if (!why.empty()) {
        note("resume: " + why +
             "; the resumed steps may round differently from an "
             "uninterrupted run");
      }
    }
    scaler.restore(c.loss_scale, c.clean_steps);
    runner.restore_applied_updates(c.applied_updates);
    start = c.steps_done;
    summary.resumed_from = path;
    summary.resumed_steps = start;
    note("resumed from " + path + " (" + std::to_string(start) + " steps done)");
  }
  if (!opts.checkpoint_dir.empty() && writer) {
    std::filesystem::create_directories(opts.checkpoint_dir);
  }
  // --profile: records the first profile_steps timed steps (src/prof/profiler.h).
  std::unique_ptr<prof::Profiler> profiler =
      opts.profile && writer ? std::make_unique<prof::Profiler>(
                                   prof::ProfileSettings{opts.profile_dir, opts.profile_steps,
                                                         opts.warmup_steps, opts.profile_api_calls},
                                   model, *backend)
                             : nullptr;
  // The clock over the timed steps, beside their times (and in the
  // profile's summary under --profile).
  std::unique_ptr<prof::ClockSampler> clock_sampler =
      writer && backend->name() == "cuda" ? prof::ClockSampler::for_current_gpu() : nullptr;

  // Steps are enqueued ahead: step n+1 is launched before step n's loss is
  // read, so the host's work overlaps the device's. The loop waits for every
  // step in flight where the timing regime changes -- when the warm-up ends,
  // and before the first step after the profiled ones (the profiler must
  // stop before the baseline steps it is compared with start) -- and keeps a
  // single step in flight while --dump-dir reads gradients after step 1.
  struct Launched {
    int step = 0;
    bool timed = false;
    bool profiled = false;
    std::vector<std::int32_t> rows;  // kept for --dump-dir
  };
  std::deque<Launched> launched;
  // --log-logit-stats reads the step's activations after it: one in flight.
  const int depth = dump.enabled() || opts.log_logit_stats ? 1 : runner.max_in_flight();
  bool capture_failure_told = false;
  // The divergence guard: the last finite loss, for the message.
  double last_finite = std::numeric_limits<double>::quiet_NaN();
  std::string last_finite_step = "none";
  auto step_name = [&](int step) {
    return step >= 1 ? "step " + std::to_string(step) + "/" + std::to_string(opts.num_steps)
                     : "warm-up step " + std::to_string(step + opts.warmup_steps) + "/" +
                           std::to_string(opts.warmup_steps);
  };
  // Data parallel: a signal reaches the ranks at different steps, and a
  // rank that stopped alone would leave the others waiting in a collective;
  // each step carries every rank's vote, and the run stops after the first
  // step a rank voted in, on every rank alike.
  bool stop_agreed = false;
  auto stop_now = [&] { return comm != nullptr ? stop_agreed : interrupt_signal() != 0; };
  auto complete_oldest = [&] {
    StepRecord r = runner.finish();
    if (opts.log_logit_stats) r.logits = model.logit_stats();
    stop_agreed = stop_agreed || r.stop_agreed;
    Launched l = std::move(launched.front());
    launched.pop_front();
    r.step = l.step;
    if (summary.stop == TrainSummary::Stop::Diverged) return;  // a step launched after it
    if (std::isfinite(r.loss)) {
      last_finite = r.loss;
      last_finite_step = step_name(l.step);
    } else if (!r.skipped) {  // fp16 skips a step whose gradients overflowed, and goes on
      summary.stop = TrainSummary::Stop::Diverged;
      char loss[64];
      std::snprintf(loss, sizeof loss, "%g", last_finite);
      summary.stop_message = "diverged at " + step_name(l.step) + ": loss " +
                             (std::isnan(r.loss) ? "nan" : "inf") + " (last finite loss " +
                             (std::isnan(last_finite) ? std::string("none") : loss) + " at " +
                             last_finite_step + "); try a lower --learning-rate";
    }
    if (profiler) profiler->end_step(l.timed, l.profiled, r.ms);
    const double device_peak = static_cast<double>(backend->device_peak_used_bytes());
    summary.peak_mb = std::max(summary.peak_mb, planned_bytes / 1e6);
    summary.device_used_peak_mb = std::max(summary.device_used_peak_mb, device_peak / 1e6);
    memory_profile.sample("after " + step_name(l.step));
    if (!l.timed) {
      r.step = l.step + opts.warmup_steps;
      if (on_warmup) on_warmup(r, opts);
      return;
    }
    dump.batch(l.step, l.rows, opts.shape);
    if (l.step == 1) dump.gradients(model, r.loss_scale);
    summary.steps.push_back(r);
    if (on_step) on_step(r, opts, summary);
  };
  auto baseline = [&](int step) { return step >= 1 && (!profiler || step > opts.profile_steps); };

  // Every rank draws the global batch (the same seeded sequence) and keeps
  // its own block of rows: the ranks see disjoint shards of each batch, and
  // together the batch one process would train on with --batch-size B*N.
  auto rank_rows = [&](std::vector<std::int32_t> global) {
    if (world == 1) return global;
    const std::size_t per_rank = global.size() / static_cast<std::size_t>(world);
    const auto first = global.begin() + static_cast<std::ptrdiff_t>(per_rank * rank);
    return std::vector<std::int32_t>(first, first + static_cast<std::ptrdiff_t>(per_rank));
  };
  std::int64_t launched_count = 0;
  auto evaluate = [&](int after_step) {
    const double loss = data.evaluate(model, opts.eval_steps, opts.shape.batch);
    summary.evals.push_back({after_step, loss});
    char line[128];
    std::snprintf(line, sizeof line, "eval after step %d/%d | val loss %.4f (%d batches)",
                  after_step, opts.num_steps, loss, opts.eval_steps);
    note(line);
  };
  auto drain = [&] {
    while (runner.in_flight() > 0) complete_oldest();
  };
  int last_checkpoint = start;
  auto checkpoint = [&](int steps_done) {
    CheckpointState c;
    c.steps_done = steps_done;
    c.next_lr = schedule.at(std::min(steps_done, total - 1));
    c.applied_updates = runner.applied_updates();
    c.loss_scale = scaler.scale();
    c.clean_steps = scaler.clean_steps();
    c.sampler = data.train().state();
    c.tuning = backend->tuning_state();
    if (!writer) {
      gather_checkpoint_state(model);  // rank 0's save reads the sharded state
      last_checkpoint = steps_done;
      return;
    }
    try {
      summary.checkpoint =
          save_checkpoint(opts.checkpoint_dir, model, c, opts, opts.keep_checkpoints);
      note("checkpoint " + summary.checkpoint);
    } catch (const RuntimeFailure& e) {
      summary.save_error = std::string("--checkpoint-dir: ") + e.what();
    }
    last_checkpoint = steps_done;
  };

  std::chrono::steady_clock::time_point wall_start;
  for (int i = start; i < total && summary.stop == TrainSummary::Stop::Completed; ++i) {
    const bool timed = i >= opts.warmup_steps;
    const int step = i - opts.warmup_steps + 1;
    // Between steps: a signal, a checkpoint or an evaluation waits for the
    // steps in flight (their batches were drawn: the sampler's state is
    // that of the steps done once they finish).
    if (stop_now()) {
      drain();
      if (summary.stop == TrainSummary::Stop::Completed) {
        summary.stop = TrainSummary::Stop::Interrupted;
        // A rank the signal did not reach stops as if sent SIGTERM.
        summary.signal = interrupt_signal() != 0 ? interrupt_signal() : SIGTERM;
      }
      break;
    }
    if (!opts.checkpoint_dir.empty() && opts.checkpoint_every > 0 && i > start &&
        i % opts.checkpoint_every == 0) {
      drain();
      if (summary.stop != TrainSummary::Stop::Completed) break;
      checkpoint(i);
    }
    if (data.has_validation() && step > 1 && (step - 1) % opts.eval_every == 0) {
      drain();
      if (summary.stop != TrainSummary::Stop::Completed) break;
      evaluate(step - 1);
    }
    const bool regime_changes = step == 1 || (profiler && step == opts.profile_steps + 1);
    while (runner.in_flight() > 0 &&
           (regime_changes || runner.in_flight() >= depth || !runner.can_launch())) {
      complete_oldest();
    }
    if (baseline(step) && (!baseline(step - 1) || i == start))
      wall_start = std::chrono::steady_clock::now();
    // Every micro-batch of the step (UpdateRecipe::accumulation), drawn at once.
    const int rows = opts.shape.batch * world * plan.update.accumulation;
    Launched l{step, timed, false, rank_rows(data.train().next_batch(rows))};
    runner.set_learning_rate(schedule.at(i));
    if (profiler) l.profiled = profiler->begin_step(timed);
    if (clock_sampler && timed) clock_sampler->start();  // a no-op once started
    runner.launch(l.rows, interrupt_signal() != 0);
    if (profiler) profiler->end_launch();
    if (runner.capture_failed() && !capture_failure_told) {
      capture_failure_told = true;
      std::cerr << "note: " << runner.note() << std::endl;  // once, when it happens
    }
    launched.push_back(std::move(l));
    ++launched_count;
  }
  drain();
  std::optional<prof::ClockReport> clocks;
  if (clock_sampler) clocks = clock_sampler->stop();
  // Under --profile the clock is reported with the profile (summary.json).
  if (!profiler) summary.clocks = clocks;
  // A last validation loss for the finished run (not for one interrupted:
  // the user wants it to stop).
  if (data.has_validation() && summary.stop == TrainSummary::Stop::Completed &&
      !summary.steps.empty()) {
    evaluate(summary.steps.back().step);
  }
  const int steps_done = start + static_cast<int>(launched_count);
  summary.steps_done = steps_done;
  if (!opts.checkpoint_dir.empty() && summary.stop != TrainSummary::Stop::Diverged &&
      steps_done > last_checkpoint) {
    checkpoint(steps_done);
  }
  const int wall_steps =
      std::max(0, static_cast<int>(summary.steps.size()) - (profiler ? opts.profile_steps : 0));
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_start)
          .count();
  summary.wall_ms_per_step = wall_steps > 0 ? wall_ms / wall_steps : 0.0;
  dump.finish();
  fill_averages(summary, opts);
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
  // An eager run's launches are counted on a capture made only for that.
  if (!runner.replaying()) runner.count_launches();
  summary.execution = runner.replaying() ? "cuda_graph" : "eager";
  summary.execution_note = runner.note();
  summary.launches = runner.launches();
  summary.phases_timed = runner.phases_timed();
  // Diverged weights are worth nothing; a failed save is reported after the
  // summary and the --json report, which must not be lost with it. The
  // weights are read on every rank (a gather under ZeRO-1), written by one.
  const bool keep_weights = (!opts.save_weights.empty() || !opts.export_hf.empty()) &&
                            summary.stop != TrainSummary::Stop::Diverged;
  const std::vector<double> final_weights = keep_weights ? model.params() : std::vector<double>();
  if (!writer) return summary;
  if (!opts.save_weights.empty() && summary.stop != TrainSummary::Stop::Diverged) {
    try {
      save_hf_weights(opts.save_weights, model.layout(), final_weights);
    } catch (const RuntimeFailure& e) {
      summary.save_error = std::string("--save-weights: ") + e.what();
    }
  }
  if (!opts.export_hf.empty() && summary.stop != TrainSummary::Stop::Diverged) {
    try {
      export_hf_directory(opts.export_hf, model.layout(), final_weights, opts.shape.seq,
                          tokenizer ? &*tokenizer : nullptr);
    } catch (const RuntimeFailure& e) {
      const std::string error = std::string("--export-hf: ") + e.what();
      summary.save_error = summary.save_error.empty() ? error : summary.save_error + "; " + error;
    }
  }
  return summary;
}

}  // namespace tinyllama
