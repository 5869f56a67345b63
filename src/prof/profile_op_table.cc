// The profile summary's per-op tables (profile_summary.cc): the cost model's
// ops joined with the time measured under their markers, one row per kind
// summed over layers and one per instance, with achieved rates and the
// roofline's bound.
#include "prof/profile_op_table.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tinyllama::prof {
namespace {

using nlohmann::json;
using i64 = std::int64_t;

// A row of the per-op table: one op (kind key) summed over layers, or one
// instance (full path).
struct OpRow {
  std::string op;
  std::string kind = "unmodelled";
  i64 instances = 0;  // per step, from the cost model
  i64 flops = 0;      // per step
  i64 bytes = 0;      // per step
  bool modelled = false;
  OpTime time;
};

void add_time(OpTime& sum, const OpTime& t) {
  sum.host_calls += t.host_calls;
  sum.host_ns += t.host_ns;
  sum.kernels += t.kernels;
  sum.transfers += t.transfers;
  sum.gpu_ns += t.gpu_ns;
  sum.beside_ns += t.beside_ns;
}

const char* source_name(TimeSource s) {
  switch (s) {
    case TimeSource::GpuKernels:
      return "gpu_kernels";
    case TimeSource::HostRanges:
      return "host_ranges";
    case TimeSource::None:
      return "none";
  }
  return "none";
}

json nullable(bool present, double value) {
  return present ? json(value) : json(nullptr);
}

// Ops the host marked that the cost model has no entry for, and the
// pseudo-ops of GPU work outside every op; containers (forward, layer3) are
// not rows.
std::vector<std::string> unmodelled_leaves(const Attribution& a, const StepCost& cost) {
  std::vector<std::string> leaves;
  for (auto it = a.ops.begin(); it != a.ops.end(); ++it) {
    const std::string& path = it->first;
    if (cost.find(path) != nullptr) continue;
    const auto next = a.ops.lower_bound(path + "/");
    const bool container = next != a.ops.end() && next->first.rfind(path + "/", 0) == 0;
    if (!container || it->second.kernels > 0 || it->second.transfers > 0) leaves.push_back(path);
  }
  return leaves;
}

json op_row_json(const OpRow& r, TimeSource source, double steps,
                 const std::optional<DevicePeak>& peak, double peak_tf) {
  const i64 time_ns = source == TimeSource::GpuKernels   ? r.time.gpu_ns
                      : source == TimeSource::HostRanges ? r.time.host_ns
                                                         : 0;
  const bool timed = time_ns > 0;
  json j;
  j["op"] = r.op;
  j["kind"] = r.kind;
  j["instances_per_step"] = r.instances;
  j["flops_per_step"] = r.modelled ? json(r.flops) : json(nullptr);
  j["bytes_per_step"] = r.modelled ? json(r.bytes) : json(nullptr);
  const bool has_ai = r.modelled && r.bytes > 0;
  const double ai = has_ai ? static_cast<double>(r.flops) / static_cast<double>(r.bytes) : 0;
  j["arithmetic_intensity"] = nullable(has_ai, ai);
  j["host_ms_per_step"] = static_cast<double>(r.time.host_ns) / steps / 1e6;
  const bool gpu = source == TimeSource::GpuKernels;
  j["gpu_ms_per_step"] = nullable(gpu, static_cast<double>(r.time.gpu_ns) / steps / 1e6);
  j["kernels_per_step"] = nullable(gpu, static_cast<double>(r.time.kernels) / steps);
  // How much of the op's kernel time shared the GPU with another stream's
  // kernels (a captured step's parallel branches): time that ran slower
  // than alone, or was hidden behind the main stream (prof/overlap.h).
  const bool has_kernels = gpu && r.time.gpu_ns > 0;
  j["beside_other_streams_ms_per_step"] =
      nullable(gpu, static_cast<double>(r.time.beside_ns) / steps / 1e6);
  j["beside_other_streams_pct"] =
      nullable(has_kernels, 100.0 * static_cast<double>(r.time.beside_ns) /
                                static_cast<double>(std::max<i64>(r.time.gpu_ns, 1)));
  j["time_ms_per_step"] = nullable(timed, static_cast<double>(time_ns) / steps / 1e6);
  // FLOPs per ns are GFLOP/s; bytes per ns are GB/s.
  const double flops_total = static_cast<double>(r.flops) * steps;
  const double bytes_total = static_cast<double>(r.bytes) * steps;
  const double achieved_tf = timed ? flops_total / static_cast<double>(time_ns) / 1e3 : 0;
  j["achieved_tflops"] = nullable(timed && r.modelled, achieved_tf);
  j["achieved_gbps"] =
      nullable(timed && r.modelled, bytes_total / static_cast<double>(std::max<i64>(time_ns, 1)));
  if (peak && peak_tf > 0 && has_ai) {
    const double memory_roof_tf = ai * peak->bandwidth_gbs / 1e3;
    const double roof = std::min(peak_tf, memory_roof_tf);
    j["roof_tflops"] = roof;
    j["bound"] = memory_roof_tf < peak_tf ? "memory" : "compute";
    j["pct_of_roof"] = nullable(timed, 100.0 * achieved_tf / roof);
  } else {
    j["roof_tflops"] = nullptr;
    j["bound"] = nullptr;
    j["pct_of_roof"] = nullptr;
  }
  return j;
}

// How an op's achieved rates are computed: its JSON row's inputs.
struct RowFigures {
  TimeSource source;
  double steps;
  const std::optional<DevicePeak>& peak;
  double peak_tf;
  json row(const OpRow& r) const { return op_row_json(r, source, steps, peak, peak_tf); }
};

void fill_op_tables(const ProfileInputs& in, const Attribution& a, const RowFigures& fig, json& j) {
  std::vector<OpRow> kinds;
  std::map<std::string, std::size_t> kind_at;
  json instances = json::array();
  for (const OpCost& o : in.cost.ops) {
    const std::string key = o.kind_key();
    auto [it, added] = kind_at.emplace(key, kinds.size());
    if (added) {
      OpRow r;
      r.op = key;
      r.kind = op_kind_name(o.kind);
      r.modelled = true;
      kinds.push_back(std::move(r));
    }
    OpRow& k = kinds[it->second];
    OpRow inst;
    inst.op = o.path;
    inst.kind = op_kind_name(o.kind);
    inst.modelled = true;
    inst.instances = 1;
    inst.flops = o.flops;
    inst.bytes = o.bytes;
    const auto t = a.ops.find(o.path);
    if (t != a.ops.end()) inst.time = t->second;
    ++k.instances;
    k.flops += o.flops;
    k.bytes += o.bytes;
    add_time(k.time, inst.time);
    instances.push_back(fig.row(inst));
  }
  // Unmodelled ops are summed over layers too: a data-parallel step has a
  // grad_exchange per layer, which is one row of the op table.
  for (const std::string& path : unmodelled_leaves(a, in.cost)) {
    OpRow r;
    r.op = path;
    r.time = a.ops.at(path);
    instances.push_back(fig.row(r));
    auto [it, added] = kind_at.emplace(op_kind_key(path), kinds.size());
    if (added) {
      r.op = it->first;
      kinds.push_back(r);
      continue;
    }
    add_time(kinds[it->second].time, r.time);
  }
  json ops = json::array();
  for (const OpRow& r : kinds) ops.push_back(fig.row(r));
  j["op_time_source"] = source_name(fig.source);
  j["ops"] = ops;
  j["op_instances"] = instances;
}

}  // namespace

void op_tables(const ProfileInputs& in, const Attribution& a, TimeSource source, double steps,
               const std::optional<DevicePeak>& peak, double peak_tf, nlohmann::json& j) {
  fill_op_tables(in, a, RowFigures{source, steps, peak, peak_tf}, j);
}

}  // namespace tinyllama::prof
