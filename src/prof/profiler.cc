#include "prof/profiler.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>

#include "core/errors.h"
#include "core/op_marker.h"
#include "cuda/cuda_entry.h"
#include "prof/attribution.h"
#include "prof/cost_model.h"
#include "prof/counter_summary.h"
#include "prof/device_peaks.h"
#include "prof/kernel_explain.h"
#include "prof/kernel_stats.h"
#include "prof/profile_summary.h"
#include "prof/trace_writer.h"

namespace tinyllama::prof {
namespace {

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw RuntimeFailure("--profile-dir: cannot write " + path.string());
}

bool wants_counters(const ProfileSettings& s) {
  return s.counters || !s.explain_kernel.empty();
}

}  // namespace

Profiler::Profiler(const ProfileSettings& settings, const Model& model, Backend& backend)
    : settings_(settings),
      model_(model),
      backend_(backend),
      counter_step_(wants_counters(settings) && backend.name() == "cuda") {
  std::error_code ec;
  std::filesystem::create_directories(settings.dir, ec);
  if (ec || !std::filesystem::is_directory(settings.dir)) {
    throw RuntimeFailure("--profile-dir " + settings.dir + ": cannot create the directory" +
                         (ec ? " (" + ec.message() + ")" : std::string()));
  }
  // Attached from the start, so that a CUDA graph captured in the warm-up
  // gets its nodes tagged with the ops that created them.
  set_op_observer(&recorder_);
  if (backend.name() == "cuda") {
    collector_ = CuptiCollector::start(&recorder_, &collector_note_);
  } else {
    collector_note_ = "the run used the CPU backend";
  }
}

Profiler::~Profiler() {
  if (op_observer() == &recorder_) set_op_observer(nullptr);
}

bool Profiler::begin_step(bool timed) {
  if (timed && !window_started_) {
    // The profiled window opens: forget the warm-up's ranges and records.
    window_started_ = true;
    if (collector_) open_window();
    recorder_.clear();
  }
  if (!recording_) {
    // The profiled steps are done and CUPTI's activity records with them
    // (the trainer lets them finish first): the counter step may begin.
    if (timed && static_cast<int>(profiled_ms_.size()) >= settings_.steps) {
      const std::size_t steps = std::max<std::size_t>(profiled_ms_.size(), 1);
      counter_step_.begin(activity_.kernels.size() / steps);
    }
    return false;
  }
  // Warm-up ranges matter only while they are open (a graph node captured
  // now is tagged with the open path); dropping the finished ones keeps a
  // long warm-up from growing the buffer.
  if (!window_started_) recorder_.clear();
  nvtx_push("step");
  step_range_ = recorder_.open("step");
  return timed;
}

void Profiler::open_window() {
  const GpuActivity warmup = collector_->take_records();
  if (settings_.api_calls) return;
  // The first step autotunes its GEMMs (extra trial kernels): learn from a
  // later one.
  if (settings_.warmup_steps < 2) {
    launch_order_note_ =
        "API records kept in the profiled steps: the launch order is learnt "
        "from the last of at least 2 warm-up steps (--warmup-steps)";
    return;
  }
  std::string why_not;
  launch_order_ = learn_launch_order(recorder_.ranges(), warmup, &why_not);
  if (launch_order_) {
    collector_->record_kernels_only();
  } else if (why_not != kReplaysAGraph) {
    launch_order_note_ = "API records kept in the profiled steps: " + why_not;
  }
}

void Profiler::end_launch() {
  if (!recording_) {
    counter_step_.end_launch();
    return;
  }
  recorder_.close(step_range_);
  nvtx_pop();
  if (window_started_ && ++launched_profiled_ >= settings_.steps) stop_recording();
}

void Profiler::end_step(bool timed, bool profiled, double step_ms) {
  if (!profiled) {
    if (timed && !counter_step_.end_step(step_ms)) unprofiled_ms_.push_back(step_ms);
    return;
  }
  profiled_ms_.push_back(step_ms);
  if (static_cast<int>(profiled_ms_.size()) >= settings_.steps) stop_collecting();
}

void Profiler::stop_recording() {
  if (!recording_) return;
  recording_ = false;
  set_op_observer(nullptr);
}

void Profiler::stop_collecting() {
  stop_recording();
  if (collector_ && !collected_) {
    collected_ = true;
    // The counter step's range profiler needs CUPTI still attached.
    activity_ = collector_->finish(/*detach=*/!counter_step_.wanted());
  }
}

std::string Profiler::finish(const RunFigures& run) {
  stop_collecting();
  ProfileInputs in;
  in.device = backend_.device_description();
  in.backend = backend_.name();
  in.plan = model_.plan();
  in.model = model_.config();
  in.shape = model_.shape();
  in.cost = step_cost(in.model, in.shape, in.plan);
  in.ranges = recorder_.ranges();
  in.gpu = collector_ ? &activity_ : nullptr;
  in.gpu_note = collector_note_;
  in.times.profiled_ms = profiled_ms_;
  in.times.unprofiled_ms = unprofiled_ms_;
  in.times.run_ms_per_step = run.ms_per_step;
  in.memory.model = model_.memory();
  in.clocks = run.clocks;
  std::size_t total = 0;
  if (in.backend == "cuda" && cuda_memory_info(nullptr, &total)) {
    in.memory.device_total_bytes = static_cast<std::int64_t>(total);
  }
  if (run.device_used_peak_mb > 0) {
    in.memory.device_used_peak_bytes = static_cast<std::int64_t>(run.device_used_peak_mb * 1e6);
  }

  in.launch_order_note = launch_order_note_;
  const Attribution attribution =
      attribute(in.ranges, in.gpu, launch_order_ ? &*launch_order_ : nullptr);
  std::vector<KernelRecord> profiled_kernels;
  if (in.gpu != nullptr) {
    for (std::size_t i = 0; i < activity_.kernels.size(); ++i) {
      if (attribution.kernel_in_step[i]) profiled_kernels.push_back(activity_.kernels[i]);
    }
  }
  const std::vector<KernelStat> stats = kernel_stats(profiled_kernels);
  nlohmann::json summary_json = profile_summary(in, attribution, stats);

  const std::filesystem::path dir(settings_.dir);
  std::string written;
  const std::string counter_text = finish_counters(in, attribution, stats, summary_json, written);
  write_file(dir / "trace.json", chrome_trace(in, attribution).dump());
  write_file(dir / "summary.json", summary_json.dump(2) + "\n");
  written += (dir / "trace.json").string() + ", " + (dir / "summary.json").string();
  return format_profile_summary(summary_json) + counter_text + "wrote " + written + "\n";
}

namespace {

// --explain-kernel's text: the named kernel's counters, explained.
std::string explain_text(const std::string& spec, const std::vector<KernelStat>& stats,
                         const std::map<std::string, CounterSum>& by_kernel, double steps,
                         const Roofs& roofs) {
  std::string why;
  const int index = find_kernel(stats, spec, &why);
  if (index < 0) return "  explain   " + why + "\n";
  const KernelStat& k = stats[static_cast<std::size_t>(index)];
  const auto it = by_kernel.find(k.name);
  if (it == by_kernel.end()) return "  explain   " + k.name + ": no counters for this kernel\n";
  KernelExplainInput in;
  in.name = k.name;
  in.rank = index + 1;
  in.profiled_ns_per_step = static_cast<double>(k.total_ns) / steps;
  in.calls_per_step = static_cast<double>(k.calls) / steps;
  in.counters = it->second;
  in.roofs = roofs;
  return explain_kernel(in);
}

}  // namespace

std::string Profiler::finish_counters(const ProfileInputs& in, const Attribution& attribution,
                                      const std::vector<KernelStat>& stats, nlohmann::json& summary,
                                      std::string& written) {
  const std::filesystem::path dir(settings_.dir);
  const double steps = static_cast<double>(std::max<std::size_t>(attribution.steps.size(), 1));
  // kernel_stats.csv, with the counter columns where there are counters.
  auto write_kernel_stats = [&](const std::map<std::string, CounterSum>* by_kernel) {
    if (in.gpu == nullptr) return;
    write_file(dir / "kernel_stats.csv", kernel_stats_csv(stats, by_kernel, steps));
    written += (dir / "kernel_stats.csv").string() + ", ";
  };
  if (!wants_counters(settings_)) {
    write_kernel_stats(nullptr);
    return "";
  }
  CounterInputs counters;
  if (counter_step_.wanted()) {
    counters =
        counter_step_.inputs(in.gpu, attribution, static_cast<int>(attribution.steps.size()));
  } else {
    counters.unavailable = "hardware counters unavailable: the run used the " + in.backend +
                           " backend (counters need CUDA)";
  }
  // Read without operator[]: it would add a null "clocks" to a CPU run's summary.
  const auto clocks = summary.find("clocks");
  const double held_mhz =
      clocks != summary.end() && clocks->is_object() && clocks->contains("sm_mhz_median")
          ? (*clocks)["sm_mhz_median"].get<double>()
          : 0.0;
  const Roofs roofs = held_clock_roofs(find_device_peak(in.device), in.plan.precision, held_mhz);
  summary["counters"] = counter_section(counters, {&stats, &attribution, &in.cost, steps, roofs});
  std::string text = format_counter_summary(summary["counters"]);
  const std::map<std::string, CounterSum> by_kernel = sum_by_kernel(counters.launches);
  write_kernel_stats(counters.launches.empty() ? nullptr : &by_kernel);
  if (!counters.launches.empty()) {
    write_file(dir / "counter_launches.csv", counter_launches_csv(counters.launches));
    written += (dir / "counter_launches.csv").string() + ", ";
    const RooflineChart chart =
        roofline_chart(summary["counters"], "Measured roofline: " + in.device);
    write_file(dir / "roofline.svg", roofline_svg(chart));
    written += (dir / "roofline.svg").string() + ", ";
  }
  if (!settings_.explain_kernel.empty() && !counters.launches.empty()) {
    const std::string explained =
        explain_text(settings_.explain_kernel, stats, by_kernel, steps, roofs);
    write_file(dir / "explain_kernel.txt", explained);
    written += (dir / "explain_kernel.txt").string() + ", ";
    text += explained;
  }
  return text;
}

}  // namespace tinyllama::prof
