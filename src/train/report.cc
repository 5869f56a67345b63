#include "train/report.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/errors.h"
#include "cuda/cuda_entry.h"
#include "io/atomic_file.h"
#include "model/config_json.h"
#include "model/step_plan_json.h"
#include "prof/memory_timeline_json.h"
#include "prof/profile_summary.h"
#include "train/exercise_report.h"
#include "train/memory_check.h"

namespace tinyllama {
namespace {

std::string printf_string(const char* format, ...) __attribute__((format(printf, 1, 2)));

std::string printf_string(const char* format, ...) {
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  return text;
}

double per_second(double count, double ms) {
  return ms > 0 ? count / (ms / 1e3) : 0.0;
}

std::string level_line(const StepPlan& plan) {
  std::string line = plan.level + " (" + plan.describe() + ")";
  for (const Fallback& f : plan.fallbacks) line += "; " + f.describe();
  if (plan.attention_auto.requested)
    line += "; attention " + plan.attention_auto.describe(plan.ops.attention);
  if (!plan.activations_auto.empty()) line += "; activations " + plan.activations_auto;
  if (!plan.kernel_launch_auto.empty()) line += "; kernel_launch " + plan.kernel_launch_auto;
  return line;
}

std::string precision_line(Precision p) {
  if (!p.mixed()) return precision_name(p) + " (no TF32)";
  if (p.fp8_linears) {
    return "bfloat16 compute with FP8 linear GEMMs where the plan says, fp32 master weights and "
           "optimizer state";
  }
  return std::string(dtype_name(p.compute)) + " compute, fp32 master weights and optimizer state" +
         (p.compute == DType::F16 ? ", dynamic loss scaling" : "");
}

int world_of(const TrainOptions& opts) {
  return opts.plan.parallel.enabled ? opts.plan.parallel.world : 1;
}

// The training recipe (train/recipe.h) as the run resolved it.
nlohmann::json recipe_json(const TrainOptions& opts) {
  const TrainingRecipe& r = opts.recipe;
  const LrSchedule lr = lr_schedule(opts);
  const int world = world_of(opts);
  const int micro = micro_batches(opts, world);
  return {{"lr_schedule", lr_decay_name(lr.decay)},
          {"lr_peak", lr.peak},
          {"lr_min", lr.floor},
          {"lr_warmup_steps", lr.warmup},
          {"lr_decay_steps",
           lr.decay == LrDecay::Wsd ? nlohmann::json(lr.decay_steps) : nlohmann::json(nullptr)},
          {"optimizer_steps", lr.total},
          {"grad_clip", r.grad_clip > 0 ? nlohmann::json(r.grad_clip) : nlohmann::json(nullptr)},
          {"grad_norm_logged", opts.plan.update.needs_norm()},
          {"grad_accum_steps", micro},
          {"tokens_per_step", opts.shape.tokens() * world * micro},
          {"weight_decay", r.weight_decay},
          {"decay_params", r.decay_matrices_only ? "matrices" : "all"},
          {"adam_betas", {r.adam_beta1, r.adam_beta2}},
          {"adam_eps", r.adam_eps}};
}

nlohmann::json config_json(const TrainOptions& opts) {
  const ModelConfig& m = opts.model;
  nlohmann::json config = model_shape_json(m);
  config.update({
      {"head_dim", m.head_dim()},
      {"rms_eps", m.rms_eps},
      {"rope_theta", m.rope_theta},
      {"batch_size", opts.shape.batch},
      {"seq_len", opts.shape.seq},
      {"num_steps", opts.num_steps},
      {"warmup_steps", opts.warmup_steps},
      {"learning_rate", opts.learning_rate},
      {"seed", opts.seed},
      {"data_seed", opts.data_order_seed()},
      {"data_pool_rows", opts.data_pool_rows},
      {"level", opts.plan.level},
      {"precision", precision_name(opts.plan.precision)},
      {"use_amp", opts.plan.precision.mixed()},
      {"amp_dtype", opts.plan.precision.mixed()
                        ? nlohmann::json(amp_dtype_name(opts.plan.precision))
                        : nlohmann::json(nullptr)},
      {"device", device_name(opts.plan.device)},
      {"init_from", opts.init_from},
      {"export_hf", opts.export_hf},
      {"recipe", recipe_json(opts)},
  });
  return config;
}

// One step's device work by graph node type (null when not counted).
nlohmann::json launches_json(const std::optional<GraphStats>& g) {
  if (!g) return nullptr;
  return {{"kernels", g->kernels},
          {"memsets", g->memsets},
          {"memcpys", g->memcpys},
          {"other", g->other}};
}

// NaN (a phase not measured) becomes null rather than a made-up number.
nlohmann::json ms_json(double ms) {
  return std::isfinite(ms) ? nlohmann::json(ms) : nlohmann::json(nullptr);
}

std::string execution_line(const TrainSummary& s) {
  std::string line = s.execution == "cuda_graph" ? "one CUDA graph replay per step" : "eager";
  if (s.launches) {
    line += printf_string(" | %d kernel launches per step", s.launches->kernels);
    if (s.launches->memsets + s.launches->memcpys > 0) {
      line +=
          printf_string(" (+ %d memsets, %d memcpys)", s.launches->memsets, s.launches->memcpys);
    }
  }
  if (!s.execution_note.empty()) line += " | " + s.execution_note;
  return line;
}

nlohmann::json memory_json(const MemoryBreakdown& m) {
  return {{"parameters_bytes", m.parameters}, {"gradients_bytes", m.gradients},
          {"optimizer_bytes", m.optimizer},   {"activations_bytes", m.activations},
          {"workspace_bytes", m.workspaces},  {"total_bytes", m.total()}};
}

}  // namespace

std::string format_run_header(const TrainOptions& opts) {
  const ModelConfig& m = opts.model;
  const StepPlan& plan = opts.plan;
  std::string out = printf_string(
      "train | model D%d L%d H%d K%d F%d vocab %d | batch %d x seq %d | %d warm-up + %d timed "
      "steps | lr %g | seed %llu | %s | %s | %s\n",
      m.hidden_dim, m.num_layers, m.num_heads, m.num_kv_heads, m.ffn_dim, m.vocab_size,
      opts.shape.batch, opts.shape.seq, opts.warmup_steps, opts.num_steps, opts.learning_rate,
      static_cast<unsigned long long>(opts.seed), plan.level.c_str(),
      precision_name(plan.precision).c_str(), device_name(plan.device));
  // The resolved plan, then each choice that fell back and why: said once
  // here rather than on every step.
  out += "plan | " + plan.describe() + " | workspaces " + format_bytes(plan.workspace_bytes());
  for (const Fallback& f : plan.fallbacks) out += "\nfallback | " + f.describe();
  if (plan.attention_auto.requested) {
    out += "\nattention | " + plan.attention_auto.describe(plan.ops.attention);
  }
  if (!plan.activations_auto.empty()) out += "\nactivations | " + plan.activations_auto;
  if (!plan.kernel_launch_auto.empty()) out += "\nkernel_launch | " + plan.kernel_launch_auto;
  if (plan.precision.fp8_linears) {
    out +=
        "\nfp8 | linear GEMMs in FP8 (E4M3 weights and activations, E5M2 gradients, "
        "per-tensor " +
        std::string(fp8_scaling_name(plan.fp8.scaling)) +
        " scaling; attention, norms, loss, LM head in bf16): " + plan.fp8.describe();
  }
  out += "\nrecipe | " + describe_recipe(opts, world_of(opts));
  if (opts.faults.any()) out += "\n" + injected_faults_line(opts.faults);
  return out;
}

std::string format_step_line(const StepRecord& rec, const TrainOptions& opts, double peak_mb) {
  std::string line = printf_string(
      "step %d/%d | loss %.4f | %.1f samples/s | %.2f ms | peak %.1f MB", rec.step, opts.num_steps,
      rec.loss, per_second(opts.shape.batch * opts.plan.update.accumulation, rec.ms), rec.ms,
      peak_mb);
  if (opts.recipe.lr_decay != LrDecay::Constant || opts.recipe.lr_warmup_steps > 0) {
    line += printf_string(" | lr %.3e", rec.lr);
  }
  if (std::isfinite(rec.grad_norm)) line += printf_string(" | grad norm %.4f", rec.grad_norm);
  if (rec.skipped) line += printf_string(" | skipped (overflow), scale %g", rec.loss_scale);
  return line;
}

bool should_log_step(int step, const TrainOptions& opts) {
  return step == 1 || step == opts.num_steps || (opts.log_every > 0 && step % opts.log_every == 0);
}

std::string format_warmup_line(const StepRecord& rec, const TrainOptions& opts) {
  return printf_string("warm-up %d/%d | loss %.4f | %.2f ms", rec.step, opts.warmup_steps, rec.loss,
                       rec.ms);
}

bool should_log_warmup(int step, const TrainOptions& opts) {
  return step == 1 || step == opts.warmup_steps ||
         (opts.log_every > 0 && step % opts.log_every == 0);
}

std::string format_duration(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  if (s < 60) return printf_string("%lds", s);
  if (s < 3600) return printf_string("%ldm%02lds", s / 60, s % 60);
  return printf_string("%ldh%02ldm", s / 3600, (s % 3600) / 60);
}

std::string format_progress_line(int done, const TrainOptions& opts, double s_per_step) {
  const int total = opts.warmup_steps + opts.num_steps;
  const std::string where =
      done <= opts.warmup_steps
          ? printf_string("warm-up %d/%d", done, opts.warmup_steps)
          : printf_string("step %d/%d", done - opts.warmup_steps, opts.num_steps);
  const std::string rate = s_per_step >= 1 ? printf_string("%.2f s/step", s_per_step)
                                           : printf_string("%.1f ms/step", s_per_step * 1e3);
  return where + " | " + rate + " | ETA " + format_duration(s_per_step * (total - done));
}

std::string format_summary(const TrainSummary& s, const TrainOptions& opts) {
  int skipped = 0;
  for (const StepRecord& r : s.steps) skipped += r.skipped ? 1 : 0;
  const MemoryBreakdown& m = s.memory;

  std::string out = printf_string("summary over %zu timed steps (after %d untimed warm-up steps)\n",
                                  s.steps.size(), opts.warmup_steps);
  out += printf_string("  throughput   %.1f samples/s | %.0f tokens/s\n", s.samples_per_s,
                       s.tokens_per_s);
  if (s.ranks > 1 || s.parallel != "off") {
    out += printf_string("  ranks        %d (%.0f tokens/s per rank) | %s\n", s.ranks,
                         s.tokens_per_s_per_rank, s.parallel.c_str());
  }
  if (s.phases_timed) {
    out += printf_string(
        "  step time    %.2f ms (forward %.2f ms | backward %.2f ms | optimizer %.2f ms)\n",
        s.ms_per_step, s.forward_ms, s.backward_ms, s.optimizer_ms);
  } else {
    out += printf_string("  step time    %.2f ms (phases not measured, see execution)\n",
                         s.ms_per_step);
  }
  if (s.wall_ms_per_step > 0) {
    out += printf_string(
        "  wall clock   %.2f ms/step on the host (%.1f samples/s): the step plus the loop's "
        "own work around it\n",
        s.wall_ms_per_step, opts.shape.batch / (s.wall_ms_per_step / 1e3));
  }
  // The clock the steps ran at decides what they could reach.
  if (s.clocks) out += prof::format_clocks(prof::clocks_summary(*s.clocks), "  clocks       ");
  out += "  execution    " + execution_line(s) + "\n";
  out += printf_string("  final loss   %.4f\n", s.final_loss);
  if (!s.evals.empty()) {
    out += printf_string("  val loss     %.4f (after step %d)\n", s.evals.back().loss,
                         s.evals.back().after_step);
  }
  if (skipped > 0) out += printf_string("  skipped      %d steps (fp16 overflow)\n", skipped);
  // Data parallel: one rank's memory (each rank holds as much; ZeRO-1 keeps
  // only its shards of AdamW's state).
  out += printf_string(
      "  peak memory  %.1f MB%s (parameters %s, gradients %s, optimizer %s, activations %s, "
      "workspaces %s)\n",
      s.peak_mb, s.ranks > 1 ? " per rank" : "", format_bytes(m.parameters).c_str(),
      format_bytes(m.gradients).c_str(), format_bytes(m.optimizer).c_str(),
      format_bytes(m.activations).c_str(), format_bytes(m.workspaces).c_str());
  if (s.device_used_peak_mb > 0) {
    out += printf_string(
        "  device used  %.1f MB (the driver's count, sampled after each step; CUDA context "
        "included)\n",
        s.device_used_peak_mb);
  }
  out += printf_string("  parameters   %lld\n", static_cast<long long>(s.parameter_count));
  out +=
      "  device       " + std::string(device_name(opts.plan.device)) + ": " + s.device_name + "\n";
  out += "  level        " + level_line(opts.plan) + "\n";
  out += "  precision    " + precision_line(opts.plan.precision) + "\n";
  if (opts.faults.any()) out += "  " + injected_faults_line(opts.faults) + "\n";
  return out;
}

namespace {

// How the run went beyond its steps: data, evaluations, checkpoints, how it
// stopped.
nlohmann::json run_json(const TrainSummary& s, const TrainOptions& opts) {
  nlohmann::json evals = nlohmann::json::array();
  for (const TrainSummary::Eval& e : s.evals) {
    evals.push_back({{"after_step", e.after_step}, {"val_loss", e.loss}});
  }
  const char* stop = s.stop == TrainSummary::Stop::Completed     ? "completed"
                     : s.stop == TrainSummary::Stop::Interrupted ? "interrupted"
                                                                 : "diverged";
  return {{"data", opts.data.empty() ? nlohmann::json("synthetic") : nlohmann::json(opts.data)},
          {"evals", evals},
          {"stop", stop},
          {"signal", s.stop == TrainSummary::Stop::Interrupted ? nlohmann::json(s.signal)
                                                               : nlohmann::json(nullptr)},
          {"stop_message", s.stop_message},
          {"steps_done", s.steps_done},
          {"resumed_from", s.resumed_from},
          {"resumed_steps", s.resumed_steps},
          {"checkpoint", s.checkpoint}};
}

}  // namespace

nlohmann::json json_report(const TrainSummary& s, const TrainOptions& opts) {
  nlohmann::json losses = nlohmann::json::array();
  nlohmann::json lrs = nlohmann::json::array();
  nlohmann::json norms = nlohmann::json::array();
  nlohmann::json steps = nlohmann::json::array();
  for (const StepRecord& r : s.steps) {
    losses.push_back(r.loss);
    lrs.push_back(r.lr);
    // null where the plan computes no norm (UpdateRecipe::needs_norm)
    norms.push_back(std::isfinite(r.grad_norm) ? nlohmann::json(r.grad_norm)
                                               : nlohmann::json(nullptr));
    steps.push_back({{"step", r.step},
                     {"loss", r.loss},
                     {"ms", r.ms},
                     {"forward_ms", ms_json(r.forward_ms)},
                     {"backward_ms", ms_json(r.backward_ms)},
                     {"optimizer_ms", ms_json(r.optimizer_ms)},
                     {"skipped", r.skipped},
                     {"loss_scale", r.loss_scale},
                     {"lr", r.lr},
                     {"grad_norm", norms.back()}});
  }
  return {
      {"version", TINYLLAMA_VERSION},
      {"samples_per_s", s.samples_per_s},
      {"tokens_per_s", s.tokens_per_s},
      {"ranks", s.ranks},
      {"tokens_per_s_per_rank", s.tokens_per_s_per_rank},
      {"data_parallel", s.parallel},
      {"ms_per_step", s.ms_per_step},
      {"wall_ms_per_step", s.wall_ms_per_step},
      {"forward_ms", ms_json(s.forward_ms)},
      {"backward_ms", ms_json(s.backward_ms)},
      {"optimizer_ms", ms_json(s.optimizer_ms)},
      {"phases_timed", s.phases_timed},
      {"execution", s.execution},
      {"execution_note", s.execution_note},
      // Kernel nodes of one step's graph (eager runs: counted on a capture
      // that never runs); null on the cpu backend.
      {"kernel_launches_per_step",
       s.launches ? nlohmann::json(s.launches->kernels) : nlohmann::json(nullptr)},
      {"graph_nodes_per_step", launches_json(s.launches)},
      {"final_loss", s.final_loss},
      {"losses", losses},
      {"lrs", lrs},
      {"grad_norms", norms},
      {"steps", steps},
      {"peak_mb", s.peak_mb},
      {"device_used_peak_mb", s.device_used_peak_mb},
      // The SM clock and power over the timed steps (prof/gpu_clocks.h);
      // null on the cpu backend and under --profile (its summary.json has it).
      {"clocks", s.clocks ? prof::clocks_summary(*s.clocks) : nlohmann::json(nullptr)},
      {"memory", memory_json(s.memory)},
      // The activations by kind and each arena buffer's lifetime in one
      // step's ops (prof/memory_timeline.h); null before a plan is resolved.
      {"activations", opts.plan.level.empty()
                          ? nlohmann::json(nullptr)
                          : prof::activation_breakdown_json(
                                prof::trace_memory_timeline(opts.model, opts.shape, opts.plan))},
      {"parameter_count", s.parameter_count},
      {"config", config_json(opts)},
      {"run", run_json(s, opts)},
      {"plan", plan_json(opts.plan)},
      // Exercise faults (docs/EXERCISES.md): a run with any is not a measurement.
      {"injected_faults", opts.faults.names()},
      {"device",
       {{"kind", device_name(opts.plan.device)},
        {"name", s.device_name},
        {"build", cuda_build_versions()}}},
  };
}

void write_json_report(const std::string& path, const TrainSummary& summary,
                       const TrainOptions& opts) {
  const std::string text = json_report(summary, opts).dump(2) + "\n";
  write_atomically("--json", path, [&](FileSink& out) { out.write(text); });
}

}  // namespace tinyllama
