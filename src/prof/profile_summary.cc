#include "prof/profile_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/median.h"
#include "model/config_json.h"
#include "model/step_plan_json.h"
#include "prof/communication.h"
#include "prof/device_peaks.h"
#include "prof/profile_op_table.h"
#include "prof/roofline.h"

namespace tinyllama::prof {
namespace {

using nlohmann::json;
using i64 = std::int64_t;

// Nanoseconds covered by at least one interval (the GPU's busy time).
i64 union_ns(std::vector<std::pair<i64, i64>> spans) {
  std::sort(spans.begin(), spans.end());
  i64 covered = 0;
  i64 begin = 0;
  i64 end = -1;
  for (const auto& [s, e] : spans) {
    if (s > end) {
      if (end > begin) covered += end - begin;
      begin = s;
      end = e;
    } else {
      end = std::max(end, e);
    }
  }
  if (end > begin) covered += end - begin;
  return covered;
}

json nullable(bool present, double value) {
  return present ? json(value) : json(nullptr);
}

// The NCCL kernels of the profiled steps: their time per step, the part
// hidden behind compute on another stream, and the same per op.
json communication_json(const CommunicationFigures& f, double steps) {
  auto figures = [steps](const CommunicationTime& t) {
    const bool any = t.kernel_ns > 0;
    return json{
        {"kernels_per_step", static_cast<double>(t.kernels) / steps},
        {"ms_per_step", static_cast<double>(t.kernel_ns) / steps / 1e6},
        {"hidden_ms_per_step", static_cast<double>(t.hidden_ns) / steps / 1e6},
        {"hidden_pct", nullable(any, 100.0 * static_cast<double>(t.hidden_ns) /
                                         static_cast<double>(std::max<i64>(t.kernel_ns, 1)))}};
  };
  std::vector<std::pair<std::string, CommunicationTime>> by_op(f.by_op.begin(), f.by_op.end());
  std::stable_sort(by_op.begin(), by_op.end(), [](const auto& x, const auto& y) {
    return x.second.kernel_ns > y.second.kernel_ns;
  });
  json ops = json::array();
  for (const auto& [op, t] : by_op) {
    json row = figures(t);
    row["op"] = op;
    ops.push_back(row);
  }
  json j = figures(f.total);
  j["ops"] = ops;
  return j;
}

// The run's identity: device, backend, plan and model shape.
void describe_run(const ProfileInputs& in, const Attribution& a, json& j, json& notes) {
  j["profiled_steps"] = a.steps.size();
  j["device"] = in.device;
  j["backend"] = in.backend;
  j["level"] = in.plan.level;
  j["precision"] = precision_name(in.plan.precision);
  j["plan"] = plan_json(in.plan);
  j["config"] = model_shape_json(in.model);
  j["config"].update({{"batch_size", in.shape.batch}, {"seq_len", in.shape.seq}});
  j["kernel_statistics"] = in.gpu != nullptr;
  if (in.gpu == nullptr) {
    notes.push_back(in.backend == "cpu"
                        ? "kernel statistics need a GPU: this run used the CPU backend, so "
                          "kernel_stats.csv is not written, trace.json holds host ranges only and "
                          "op times are the host wall times of the CPU reference ops"
                        : "kernel statistics unavailable: " + in.gpu_note +
                              "; op rates below are omitted (host ranges on a GPU time only the "
                              "launches)");
  }
}

// The profiled and unprofiled steps' medians: a host hiccup in one step (a
// host-bound eager step can take 5x its usual time on a busy machine) would
// otherwise decide the overhead.
struct StepMedians {
  bool baseline = false;  // unprofiled steps were timed
  double profiled = 0;
  double unprofiled = 0;
};

StepMedians step_medians(const ProfileInputs& in) {
  return {!in.times.unprofiled_ms.empty(), median(in.times.profiled_ms),
          median(in.times.unprofiled_ms)};
}

// ---- step time and the profiler's own overhead ----------------------------
json step_time_json(const ProfileInputs& in, const Attribution& a, double steps,
                    const StepMedians& t, json& notes) {
  json step_time = {{"profiled_ms_per_step", t.profiled},
                    {"unprofiled_ms_per_step", nullable(t.baseline, t.unprofiled)},
                    {"profiling_overhead_pct", nullable(t.baseline && t.unprofiled > 0,
                                                        100.0 * (t.profiled / t.unprofiled - 1.0))},
                    {"run_ms_per_step", in.times.run_ms_per_step},
                    {"host_launch_ms_per_step", static_cast<double>(a.step_ns) / steps / 1e6}};
  if (!t.baseline) {
    notes.push_back(
        "the profiler's overhead is measured against the timed steps after the profiled ones: "
        "run more --num-steps than --profile-steps to see it");
  }
  return step_time;
}

// The profiled steps' GPU records: counts, time and the busy time.
struct GpuCounts {
  i64 kernels = 0, kernel_ns = 0, memcpys = 0, memsets = 0, transfer_ns = 0;
  std::size_t launches = 0;  // distinct launch calls (correlation ids)
  i64 busy_ns = 0;           // covered by a kernel or a transfer
};

GpuCounts gpu_counts(const GpuActivity& g, const Attribution& a) {
  GpuCounts c;
  std::set<std::uint32_t> launches;
  std::vector<std::pair<i64, i64>> busy;
  for (std::size_t i = 0; i < g.kernels.size(); ++i) {
    if (!a.kernel_in_step[i]) continue;
    const KernelRecord& k = g.kernels[i];
    ++c.kernels;
    c.kernel_ns += k.duration_ns();
    launches.insert(k.correlation);
    busy.emplace_back(k.start_ns, k.end_ns);
  }
  for (std::size_t i = 0; i < g.transfers.size(); ++i) {
    if (!a.transfer_in_step[i]) continue;
    const TransferRecord& x = g.transfers[i];
    (x.name == "memset" ? c.memsets : c.memcpys) += 1;
    c.transfer_ns += x.duration_ns();
    busy.emplace_back(x.start_ns, x.end_ns);
  }
  c.launches = launches.size();
  c.busy_ns = union_ns(std::move(busy));
  return c;
}

json top_kernels_json(const std::vector<KernelStat>& stats, double steps) {
  json top = json::array();
  for (std::size_t i = 0; i < stats.size() && i < 10; ++i) {
    const KernelStat& s = stats[i];
    top.push_back({{"name", s.name},
                   {"calls", s.calls},
                   {"calls_per_step", static_cast<double>(s.calls) / steps},
                   {"total_ns", s.total_ns},
                   {"ms_per_step", static_cast<double>(s.total_ns) / steps / 1e6},
                   {"share_pct", s.percentage}});
  }
  return top;
}

// ---- GPU: dispatches, unique kernels, time, busy share, top kernels --------
json gpu_json(const ProfileInputs& in, const Attribution& a, const std::vector<KernelStat>& stats,
              double steps, const GpuCounts& c) {
  const GpuActivity& g = *in.gpu;
  // Over the steps' GPU time (the trainer's CUDA events, first mark to
  // last): how much of the step the GPU had work, whatever the host did
  // between steps. Without event times, over the host's step ranges.
  double gpu_step_ns = 0;
  for (double ms : in.times.profiled_ms) gpu_step_ns += ms * 1e6;
  const bool over_events = gpu_step_ns > 0;
  const double busy_basis_ns = over_events ? gpu_step_ns : static_cast<double>(a.step_ns);
  return {
      {"kernel_dispatches_per_step", static_cast<double>(c.kernels) / steps},
      {"launch_calls_per_step", static_cast<double>(c.launches) / steps},
      {"graph_kernels_per_step", static_cast<double>(a.graph_kernels) / steps},
      {"unique_kernels", stats.size()},
      {"memcpy_per_step", static_cast<double>(c.memcpys) / steps},
      {"memset_per_step", static_cast<double>(c.memsets) / steps},
      {"kernel_time_per_step_ms", static_cast<double>(c.kernel_ns) / steps / 1e6},
      {"gpu_time_per_step_ms", static_cast<double>(c.kernel_ns + c.transfer_ns) / steps / 1e6},
      {"gpu_busy_pct", busy_basis_ns > 0
                           ? std::min(100.0, 100.0 * static_cast<double>(c.busy_ns) / busy_basis_ns)
                           : 0.0},
      {"gpu_busy_basis", over_events ? "the profiled steps' GPU time (CUDA events)"
                                     : "the profiled steps' host wall time"},
      {"dropped_records", g.dropped_records},
      {"records_by_launch_order_per_step", static_cast<double>(a.by_launch_order) / steps},
      {"top_kernels", top_kernels_json(stats, steps)}};
}

// How the ops' GPU times were matched, and what the records lack.
void gpu_notes(const ProfileInputs& in, const Attribution& a, json& notes) {
  notes.push_back(
      "op GPU times sum the kernels (and memcpy/memset) each op launched: eager launches are "
      "matched by correlation id to the API call inside the op's host range, kernels replayed "
      "from a CUDA graph by the graph node captured inside the op's range");
  if (a.by_launch_order > 0) {
    notes.push_back(
        "the eager steps were profiled without CUPTI's API records, which cost a host-bound "
        "step most of the profiler's overhead: each kernel and copy takes the op of the launch "
        "at its place in the order learnt from the last warm-up step (which kept them), every "
        "name and op checked against it; --profile-api-calls keeps them (docs/PROFILING.md)");
  }
  if (!a.launch_order_note.empty()) notes.push_back(a.launch_order_note);
  if (!in.launch_order_note.empty()) notes.push_back(in.launch_order_note);
  const auto unmatched = a.ops.find(kStepOp);
  if (a.graph_kernels > 0 && unmatched != a.ops.end() && unmatched->second.kernels > 0) {
    notes.push_back(
        "some kernels replayed from a CUDA graph carry no op tag (the graph was captured "
        "outside an op range or before profiling began); they are listed as (step)");
  }
  if (in.gpu->dropped_records > 0) {
    notes.push_back("CUPTI dropped " + std::to_string(in.gpu->dropped_records) +
                    " activity records (buffers full): counts are lower bounds");
  }
}

json communication_section(const ProfileInputs& in, const Attribution& a, double steps,
                           json& notes) {
  const CommunicationFigures comm = communication_figures(*in.gpu, a);
  if (comm.total.kernels > 0) {
    notes.push_back(
        "communication is the NCCL kernels' time, which includes each collective's wait for "
        "the slowest rank; the hidden part is the time during which a kernel that is not "
        "NCCL's ran on another stream (docs/DATA_PARALLEL.md)");
  } else if (in.plan.parallel.enabled) {
    notes.push_back(
        "data parallel, but no NCCL kernel ran in the profiled steps (one rank's in-place "
        "collectives may launch none)");
  }
  return communication_json(comm, steps);
}

// Over the 10 % target: say where it comes from. CUPTI's cost is per
// kernel (a software timestamp pair on GPUs before Blackwell) and per API
// record, so steps of many short kernels pay most.
void overhead_note(const Attribution& a, double steps, const StepMedians& t, const GpuCounts& c,
                   json& notes) {
  const double per_step_kernels = static_cast<double>(c.kernels) / steps;
  if (!t.baseline || t.unprofiled <= 0 || t.profiled / t.unprofiled <= 1.10 ||
      per_step_kernels <= 0) {
    return;
  }
  const double added_us = (t.profiled - t.unprofiled) * 1e3 / per_step_kernels;
  char text[320];
  std::snprintf(text, sizeof text,
                "profiling added %.1f %% to the step: %.2f us for each of its %.0f kernels, "
                "which average %.1f us of GPU time; CUPTI's cost is per kernel and per API "
                "call, so steps of many short kernels pay most (docs/PROFILING.md, Overhead)",
                100.0 * (t.profiled / t.unprofiled - 1.0), added_us, per_step_kernels,
                static_cast<double>(c.kernel_ns) / steps / 1e3 / per_step_kernels);
  std::string note = text;
  // Eager steps pay CUPTI's launch-path cost once per kernel on the host;
  // a replayed graph is one launch (docs/PROFILING.md, Sixth session).
  if (a.graph_kernels == 0) {
    note +=
        "; this step launched every kernel from the host: replayed as a CUDA graph "
        "(--enable-cuda-graphs) it would be one launch and cost far less to profile";
  }
  notes.push_back(note);
}

// ---- FLOPs and MFU ----------------------------------------------------------
json flops_json(const ProfileInputs& in) {
  const i64 six_n_t = 6 * matmul_parameters(in.model) * in.cost.tokens;
  const i64 attention_term = attention_training_flops(in.model, in.shape);
  return {{"model_flops_per_step", in.cost.model_flops()},
          {"gemm_flops_per_step", in.cost.gemm_flops()},
          {"attention_flops_per_step", in.cost.attention_flops()},
          {"six_n_t", six_n_t},
          {"attention_term", attention_term},
          {"matmul_parameters", matmul_parameters(in.model)},
          {"tokens_per_step", in.cost.tokens},
          {"all_flops_per_step", in.cost.total_flops()},
          {"min_bytes_per_step", in.cost.total_bytes()},
          {"attention_convention", "causal half: 6*L*B*H*S^2*hd per training step"}};
}

json device_peak_json(const std::optional<DevicePeak>& peak) {
  if (!peak) return nullptr;
  return {{"name", peak->name},
          {"fp32_tflops", peak->fp32_tflops},
          {"bf16_tflops", peak->bf16_tflops},
          {"fp16_tflops", peak->fp16_tflops},
          {"bandwidth_gbps", peak->bandwidth_gbs}};
}

// The model FLOPs utilisation, and (with the clocks sampled) at the clock
// the GPU held; sets j["mfu"] and j["clocks"].
void mfu_section(const ProfileInputs& in, const std::optional<DevicePeak>& peak, double peak_tf,
                 json& j, json& notes) {
  const double run_s = in.times.run_ms_per_step / 1e3;
  const double achieved = run_s > 0 ? static_cast<double>(in.cost.model_flops()) / run_s / 1e12 : 0;
  const bool has_mfu = peak_tf > 0 && run_s > 0;
  j["mfu"] = {{"value", nullable(has_mfu, achieved / peak_tf)},
              {"achieved_tflops", achieved},
              {"peak_tflops", nullable(peak_tf > 0, peak_tf)},
              {"basis", "model FLOPs per step / run_ms_per_step / the device's dense peak for " +
                            std::string(dtype_name(in.plan.precision.compute))}};
  if (in.clocks != nullptr) {
    j["clocks"] = clocks_summary(*in.clocks);
    // The peak scales with the clock: at the clock the GPU held, its units
    // give peak x held / the datasheet's clock (held_clock_roofs, as the
    // roofline's roofs).
    const double rated = peak ? peak_clock_mhz(*peak, in.plan.precision) : 0.0;
    if (has_mfu && rated > 0 && j["clocks"].contains("sm_mhz_median")) {
      const double held = j["clocks"]["sm_mhz_median"].get<double>();
      const double at_held = held_clock_roofs(peak, in.plan.precision, held).compute_tflops;
      j["mfu"]["at_held_clock"] = {{"sm_mhz", held},
                                   {"rated_sm_mhz", rated},
                                   {"peak_tflops", at_held},
                                   {"value", achieved / at_held}};
    }
  }
  if (!peak) {
    notes.push_back("MFU and roofline roofs omitted: no peak figures for '" + in.device +
                    "' (src/prof/device_peaks.cc lists the known GPUs)");
  } else if (peak_tf <= 0) {
    notes.push_back("MFU omitted: no dense peak for " +
                    std::string(dtype_name(in.plan.precision.compute)));
  }
}

json phases_json(const ProfileInputs& in, const Attribution& a, double steps) {
  json phases = json::array();
  for (const char* phase : {"forward", "backward", "optimizer"}) {
    const std::string prefix = std::string(phase) + "/";
    i64 flops = 0;
    for (const OpCost& o : in.cost.ops) flops += o.phase == phase ? o.flops : 0;
    i64 gpu_ns = 0;
    for (const auto& [path, t] : a.ops) {
      if (path == phase || path.rfind(prefix, 0) == 0) gpu_ns += t.gpu_ns;
    }
    const auto host = a.ops.find(phase);
    const i64 host_ns = host != a.ops.end() ? host->second.host_ns : 0;
    phases.push_back({{"phase", phase},
                      {"flops_per_step", flops},
                      {"host_ms_per_step", static_cast<double>(host_ns) / steps / 1e6},
                      {"gpu_ms_per_step",
                       nullable(in.gpu != nullptr, static_cast<double>(gpu_ns) / steps / 1e6)}});
  }
  return phases;
}

// ---- memory -------------------------------------------------------------------
json memory_json(const MemoryFigures& m) {
  auto known = [](i64 v) { return v >= 0 ? json(v) : json(nullptr); };
  return {{"parameters_bytes", m.model.parameters},
          {"gradients_bytes", m.model.gradients},
          {"optimizer_bytes", m.model.optimizer},
          {"activations_bytes", m.model.activations},
          {"workspace_bytes", m.model.workspaces},
          {"total_bytes", m.model.total()},
          {"device_total_bytes", known(m.device_total_bytes)},
          {"device_used_peak_bytes", known(m.device_used_peak_bytes)}};
}

}  // namespace

json profile_summary(const ProfileInputs& in, const Attribution& a,
                     const std::vector<KernelStat>& stats) {
  const double steps = static_cast<double>(std::max<std::size_t>(a.steps.size(), 1));
  const TimeSource source = in.gpu != nullptr     ? TimeSource::GpuKernels
                            : in.backend == "cpu" ? TimeSource::HostRanges
                                                  : TimeSource::None;
  json notes = json::array();
  json j;
  describe_run(in, a, j, notes);
  const StepMedians times = step_medians(in);
  j["step_time"] = step_time_json(in, a, steps, times, notes);
  if (in.gpu != nullptr) {
    const GpuCounts counts = gpu_counts(*in.gpu, a);
    j["gpu"] = gpu_json(in, a, stats, steps, counts);
    gpu_notes(in, a, notes);
    j["communication"] = communication_section(in, a, steps, notes);
    overhead_note(a, steps, times, counts, notes);
  } else {
    j["gpu"] = nullptr;
    j["communication"] = nullptr;
  }
  j["flops"] = flops_json(in);
  const std::optional<DevicePeak> peak = find_device_peak(in.device);
  const double peak_tf = peak ? peak_tflops(*peak, in.plan.precision) : 0.0;
  j["device_peak"] = device_peak_json(peak);
  mfu_section(in, peak, peak_tf, j, notes);
  op_tables(in, a, source, steps, peak, peak_tf, j);
  j["phases"] = phases_json(in, a, steps);
  j["memory"] = memory_json(in.memory);
  j["notes"] = notes;
  return j;
}

// ---- the printed summary ----------------------------------------------------------

}  // namespace tinyllama::prof
