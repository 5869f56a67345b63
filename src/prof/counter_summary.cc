#include "prof/counter_summary.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

namespace tinyllama::prof {
namespace {

using json = nlohmann::json;

json number_or_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

json counters_json(const CounterSum& s) {
  json j = {{"launches", s.launches}};
  for (const MetricInfo& m : metric_table()) j[m.label] = number_or_null(s.get(m.metric));
  j["dram_bytes"] = s.dram_bytes();
  j["flops"] = s.flops();
  j["fp32_flops"] = s.fp32_flops();
  j["tensor_flops"] = s.tensor_flops();
  return j;
}

json point_json(const RooflinePoint& p) {
  if (!p.placed) return nullptr;
  return {{"intensity", p.intensity},
          {"achieved_tflops", p.achieved_tflops},
          {"roof_tflops", p.roof_tflops},
          {"bound", p.roof_tflops > 0 ? (p.memory_bound ? "memory" : "compute") : "unknown"},
          {"pct_of_roof", p.pct_of_roof}};
}

json kernels_json(const CounterInputs& in, const CounterContext& ctx) {
  const std::map<std::string, CounterSum> by_kernel = sum_by_kernel(in.launches);
  json kernels = json::array();
  for (std::size_t i = 0; i < ctx.stats->size() && kernels.size() < 10; ++i) {
    const KernelStat& k = (*ctx.stats)[i];
    const auto it = by_kernel.find(k.name);
    if (it == by_kernel.end()) continue;
    const double seconds = static_cast<double>(k.total_ns) / ctx.steps / 1e9;
    const CounterSum& s = it->second;
    const RooflinePoint p =
        place_on_roofline(k.name, s.flops(), s.dram_bytes(), seconds, ctx.roofs);
    kernels.push_back({{"rank", i + 1},
                       {"name", k.name},
                       {"ms_per_step", seconds * 1e3},
                       {"dram_gbps", seconds > 0 ? s.dram_bytes() / seconds / 1e9 : 0.0},
                       {"counters", counters_json(s)},
                       {"roofline", point_json(p)}});
  }
  return kernels;
}

// Per op kind ("forward/qkv_gemm"): the profiled steps' GPU time and the
// cost model's FLOPs and bytes, summed over layers.
struct OpKindFigures {
  double gpu_ns = 0;
  double model_flops = 0;
  double model_bytes = 0;
  double model_write_bytes = 0;
};

std::map<std::string, OpKindFigures> op_kind_figures(const CounterContext& ctx) {
  std::map<std::string, OpKindFigures> kinds;
  for (const auto& [path, t] : ctx.attribution->ops) {
    kinds[op_kind_key(path)].gpu_ns += static_cast<double>(t.gpu_ns) / ctx.steps;
  }
  for (const OpCost& op : ctx.cost->ops) {
    OpKindFigures& f = kinds[op.kind_key()];
    f.model_flops += static_cast<double>(op.flops);
    f.model_bytes += static_cast<double>(op.bytes);
    f.model_write_bytes += static_cast<double>(op.write_bytes);
  }
  return kinds;
}

double ratio_or_nan(double measured, double model) {
  return model > 0 ? measured / model : NAN;
}

// The model counts every input as read from DRAM: its reads are held to
// the replayed reads (counters.h, DramReadReplayed), not to what the step
// found in L2, op by op. Its writes are held to the step's: what a kernel
// writes may stay in L2 past its end and reach DRAM during later kernels.
void ops_json(const CounterInputs& in, const CounterContext& ctx, json& section) {
  const std::map<std::string, CounterSum> measured = sum_by_op_kind(in.launches);
  const std::map<std::string, OpKindFigures> figures = op_kind_figures(ctx);
  json ops = json::array();
  json differ = json::array();
  double step_writes = 0;
  double step_model_writes = 0;
  for (const auto& [kind, s] : measured) {
    const auto f = figures.find(kind);
    const OpKindFigures fig = f != figures.end() ? f->second : OpKindFigures{};
    const double seconds = fig.gpu_ns / 1e9;
    const RooflinePoint m = place_on_roofline(kind, s.flops(), s.dram_bytes(), seconds, ctx.roofs);
    const RooflinePoint c =
        place_on_roofline(kind, fig.model_flops, fig.model_bytes, seconds, ctx.roofs);
    const double model_reads = fig.model_bytes - fig.model_write_bytes;
    const double writes = s.dram_write_bytes();
    const double reads_ratio = ratio_or_nan(s.cold_dram_read_bytes(), model_reads);
    ops.push_back(
        {{"op", kind},
         {"ms_per_step", seconds * 1e3},
         {"counters", counters_json(s)},
         {"model_flops", fig.model_flops},
         {"model_bytes", fig.model_bytes},
         {"model_read_bytes", model_reads},
         {"model_write_bytes", fig.model_write_bytes},
         {"dram_read_replayed_bytes", s.cold_dram_read_bytes()},
         {"dram_write_bytes", writes},
         {"reads_over_model", number_or_null(reads_ratio)},
         {"writes_over_model", number_or_null(ratio_or_nan(writes, fig.model_write_bytes))},
         {"measured", point_json(m)},
         {"model", point_json(c)}});
    if (fig.model_bytes > 0) {
      step_writes += writes;
      step_model_writes += fig.model_write_bytes;
    }
    if (std::isfinite(reads_ratio) && std::fabs(reads_ratio - 1) > kDramBytesTolerance) {
      differ.push_back({{"op", kind},
                        {"dram_read_bytes", s.cold_dram_read_bytes()},
                        {"model_read_bytes", model_reads},
                        {"ratio", reads_ratio}});
    }
  }
  section["ops"] = ops;
  section["dram_bytes_differ"] = differ;
  section["step_writes"] = {
      {"dram_write_bytes", step_writes},
      {"model_write_bytes", step_model_writes},
      {"ratio", number_or_null(ratio_or_nan(step_writes, step_model_writes))},
      {"basis", "the modelled ops' DRAM writes summed over the step against the model's"}};
}

}  // namespace

json counter_section(const CounterInputs& in, const CounterContext& ctx) {
  if (!in.unavailable.empty()) return {{"available", false}, {"note", in.unavailable}};
  json j = {{"available", true},
            {"passes", in.passes},
            {"ranges", in.ranges},
            {"dropped_ranges", in.dropped_ranges},
            {"refused_metrics", in.refused},
            {"counter_step_ms", in.counter_step_ms},
            {"matched", !in.launches.empty()},
            {"note", in.match_note},
            {"dram_passes", in.dram_passes},
            {"dram_note", in.dram_note},
            {"basis",
             "the step after the profiled ones, each kernel replayed once per pass, and where "
             "one follows, the DRAM pass (DRAM bytes and times, one pass, nothing replayed); "
             "rates over the profiled steps' time"}};
  j["replay_baseline"] = {
      {"launches", in.baseline_launches},
      {"dram_read_bytes",
       number_or_null(in.replay_baseline[static_cast<std::size_t>(Metric::DramRead)])},
      {"dram_write_bytes",
       number_or_null(in.replay_baseline[static_cast<std::size_t>(Metric::DramWrite)])},
      {"basis",
       "an empty kernel replayed like the step's; its DRAM bytes are taken out of every launch's"}};
  json metrics = json::array();
  for (const std::string& name : metric_names()) metrics.push_back(name);
  j["metrics"] = metrics;
  j["roofs"] = {{"compute_tflops", ctx.roofs.compute_tflops},
                {"fp32_tflops", ctx.roofs.fp32_tflops},
                {"bandwidth_gbps", ctx.roofs.bandwidth_gbps},
                {"sm_mhz", ctx.roofs.sm_mhz},
                {"ridge_flops_per_byte", ctx.roofs.known() ? ctx.roofs.ridge() : 0.0}};
  CounterSum step;
  for (const LaunchCounters& l : in.launches) step.add(l.values);
  j["step"] = counters_json(step);
  j["top_kernels"] = kernels_json(in, ctx);
  ops_json(in, ctx, j);
  // Every op range (layer by layer), compactly: what the per-kind rows sum.
  json paths = json::object();
  for (const auto& [path, s] : sum_by_op(in.launches)) {
    paths[path] = {{"launches", s.launches}, {"dram_bytes", s.dram_bytes()}, {"flops", s.flops()}};
  }
  j["op_paths"] = paths;
  return j;
}

}  // namespace tinyllama::prof
