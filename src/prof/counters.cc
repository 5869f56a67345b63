#include "prof/counters.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/median.h"
#include "prof/attribution.h"

namespace tinyllama::prof {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// clang-format off
const std::array<MetricInfo, kMetricCount> kMetrics{{
    {Metric::DramRead, "dram__bytes_read.sum", "dram_read_bytes", "bytes",
     "bytes read from device memory (HBM): what missed in L2",
     "with the kernel's time, the DRAM bandwidth it drew; near the peak bandwidth it is memory-bound",
     false},
    {Metric::DramWrite, "dram__bytes_write.sum", "dram_write_bytes", "bytes",
     "bytes written back to device memory (L2 evictions and write-through)",
     "adds to the read bytes on the same memory roof", false},
    {Metric::L2HitRate, "lts__t_sector_hit_rate.pct", "l2_hit_pct", "%",
     "share of the L2's 32-byte sector lookups that hit",
     "low: the working set streams through L2 (DRAM-bound if bytes are high); high: reuse is caught "
     "in L2, DRAM is not the limit",
     true},
    {Metric::SmActive, "sm__cycles_active.avg.pct_of_peak_sustained_elapsed", "sm_active_pct", "%",
     "share of the kernel's cycles with at least one warp resident on an SM, averaged over SMs",
     "low: too few blocks for the GPU (grid smaller than the SMs, or a tail); the launch, not the "
     "math, is the limit",
     true},
    {Metric::WarpsActive, "sm__warps_active.avg.pct_of_peak_sustained_active", "occupancy_pct", "%",
     "achieved occupancy: resident warps over the SM's warp slots, while the SM is active",
     "low: registers, shared memory or block size cap the warps, and little latency can be hidden",
     true},
    {Metric::TensorActive,
     "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "tensor_active_pct",
     "%", "share of active cycles the tensor pipe ran HMMA/HGMMA work",
     "near 100: the tensor cores are the limit (compute-bound GEMM); low in a GEMM: it waits for "
     "data or issue",
     true},
    {Metric::DramThroughput, "dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram_peak_pct",
     "%", "DRAM traffic over the kernel's time as a share of the memory's peak",
     "near 100: the memory roof binds; the kernel cannot go faster without moving fewer bytes",
     true},
    {Metric::Ffma, "sm__sass_thread_inst_executed_op_ffma_pred_on.sum", "ffma_inst", "inst",
     "fp32 fused multiply-add thread instructions (2 FLOPs each)",
     "CUDA-core fp32 work: the fp32 roof, far below the tensor roof", false},
    {Metric::Fadd, "sm__sass_thread_inst_executed_op_fadd_pred_on.sum", "fadd_inst", "inst",
     "fp32 add thread instructions (1 FLOP each)", "CUDA-core fp32 work", false},
    {Metric::Fmul, "sm__sass_thread_inst_executed_op_fmul_pred_on.sum", "fmul_inst", "inst",
     "fp32 multiply thread instructions (1 FLOP each)", "CUDA-core fp32 work", false},
    {Metric::HgmmaBf16, "sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum", "hgmma_bf16_ops",
     "ops", "tensor math ops of Hopper wgmma (HGMMA) with bf16 inputs",
     "tensor work on the bf16 roof (counted as FLOPs)", false},
    {Metric::HgmmaFp16, "sm__ops_path_tensor_op_hgmma_src_fp16.sum", "hgmma_fp16_ops", "ops",
     "tensor math ops of Hopper wgmma (HGMMA) with fp16 inputs",
     "tensor work on the fp16 roof (counted as FLOPs)", false},
    {Metric::HgmmaTf32, "sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum", "hgmma_tf32_ops",
     "ops", "tensor math ops of Hopper wgmma (HGMMA) with tf32 inputs",
     "tensor work on the tf32 roof (counted as FLOPs)", false},
    {Metric::HmmaBf16, "sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32.sum", "hmma_bf16_ops", "ops",
     "tensor math ops of mma.sync (HMMA) with bf16 inputs",
     "tensor work; HMMA reaches about half of wgmma's rate on Hopper", false},
    {Metric::HmmaFp16, "sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32.sum", "hmma_fp16_ops", "ops",
     "tensor math ops of mma.sync (HMMA) with fp16 inputs, fp32 accumulate",
     "tensor work; HMMA reaches about half of wgmma's rate on Hopper", false},
    {Metric::HmmaTf32, "sm__ops_path_tensor_op_hmma_src_tf32_dst_fp32.sum", "hmma_tf32_ops", "ops",
     "tensor math ops of mma.sync (HMMA) with tf32 inputs", "tensor work on the tf32 roof", false},
    {Metric::DurationNs, "gpu__time_duration.sum", "replay_ns", "ns",
     "the kernel's time in the counter steps (the DRAM pass's, where it ran; not the profiled "
     "steps' time)",
     "the time the rates on this page divide by", false},
    {Metric::DramReadReplayed, "", "dram_read_replayed_bytes", "bytes",
     "bytes read from device memory in the replayed passes, where each kernel's inputs come from "
     "DRAM (as ncu measures with its cache flush)",
     "its excess over dram_read_bytes is what the kernel found in L2 in the step; what the cost "
     "model is checked against", false},
}};
// clang-format on

constexpr Metric kTensorOps[] = {Metric::HgmmaBf16, Metric::HgmmaFp16, Metric::HgmmaTf32,
                                 Metric::HmmaBf16,  Metric::HmmaFp16,  Metric::HmmaTf32};

// A missing value (NaN) adds nothing but leaves the sum NaN only when no
// launch had the metric.
double add_known(double sum, double v) {
  if (std::isnan(v)) return sum;
  return std::isnan(sum) ? v : sum + v;
}

// 0 for a metric no launch reported: a sum of what is known.
double or_zero(double v) {
  return std::isnan(v) ? 0.0 : v;
}

template <typename Key>
std::map<std::string, CounterSum> sum_by(const std::vector<LaunchCounters>& launches, Key key) {
  std::map<std::string, CounterSum> sums;
  for (const LaunchCounters& l : launches) sums[key(l)].add(l.values);
  return sums;
}

}  // namespace

const std::array<MetricInfo, kMetricCount>& metric_table() {
  return kMetrics;
}

const MetricInfo& metric_info(Metric m) {
  return kMetrics[static_cast<std::size_t>(m)];
}

std::vector<std::string> metric_names() {
  return metric_names(all_metrics());
}

std::vector<std::string> metric_names(const std::vector<Metric>& metrics) {
  std::vector<std::string> names;
  names.reserve(metrics.size());
  for (Metric m : metrics) names.emplace_back(metric_info(m).cupti_name);
  return names;
}

std::vector<Metric> all_metrics() {
  std::vector<Metric> all;
  all.reserve(kMetrics.size());
  for (const MetricInfo& m : kMetrics) {
    if (*m.cupti_name != '\0') all.push_back(m.metric);
  }
  return all;
}

const std::vector<Metric>& dram_pass_metrics() {
  static const std::vector<Metric> metrics{Metric::DramRead, Metric::DramWrite,
                                           Metric::DramThroughput, Metric::DurationNs};
  return metrics;
}

std::vector<MetricValues> with_dram_pass(std::vector<MetricValues> ranges,
                                         const std::vector<MetricValues>& dram, std::string* note) {
  if (dram.size() != ranges.size()) {
    *note = "DRAM bytes from the counter step's replayed passes: the DRAM pass launched " +
            std::to_string(dram.size()) + " kernels, the counter step " +
            std::to_string(ranges.size());
    return ranges;
  }
  const auto read = static_cast<std::size_t>(Metric::DramRead);
  const auto replayed = static_cast<std::size_t>(Metric::DramReadReplayed);
  for (std::size_t r = 0; r < ranges.size(); ++r) {
    ranges[r][replayed] = ranges[r][read];
    for (Metric m : dram_pass_metrics()) {
      const auto i = static_cast<std::size_t>(m);
      ranges[r][i] = dram[r][i];
    }
  }
  return ranges;
}

MetricValues no_values() {
  MetricValues v;
  v.fill(kNaN);
  return v;
}

// Counts and bytes add up; a percentage is the mean over launches weighted
// by each launch's time (a launch without a time weighs 1 ns), so that a
// long kernel's L2 hit rate counts for more than a short one's.
void CounterSum::add(const MetricValues& launch) {
  const double ns = launch[static_cast<std::size_t>(Metric::DurationNs)];
  const double weight = !std::isnan(ns) && ns > 0 ? ns : 1.0;
  for (const MetricInfo& m : kMetrics) {
    const std::size_t i = static_cast<std::size_t>(m.metric);
    if (!m.percentage) {
      values[i] = add_known(values[i], launch[i]);
    } else if (!std::isnan(launch[i])) {
      weighted_[i] += launch[i] * weight;
      weights_[i] += weight;
      values[i] = weighted_[i] / weights_[i];
    }
  }
  ++launches;
}

double CounterSum::dram_bytes() const {
  return or_zero(get(Metric::DramRead)) + dram_write_bytes();
}

double CounterSum::dram_write_bytes() const {
  return or_zero(get(Metric::DramWrite));
}

double CounterSum::cold_dram_read_bytes() const {
  const double replayed = get(Metric::DramReadReplayed);
  return or_zero(std::isnan(replayed) ? get(Metric::DramRead) : replayed);
}

double CounterSum::seconds() const {
  return or_zero(get(Metric::DurationNs)) / 1e9;
}

double CounterSum::dram_gbps() const {
  return seconds() > 0 ? dram_bytes() / seconds() / 1e9 : kNaN;
}

double CounterSum::fp32_flops() const {
  return 2 * or_zero(get(Metric::Ffma)) + or_zero(get(Metric::Fadd)) + or_zero(get(Metric::Fmul));
}

double CounterSum::tensor_flops() const {
  double ops = 0;
  for (Metric m : kTensorOps) ops += or_zero(get(m));
  return ops;
}

double CounterSum::flops() const {
  return fp32_flops() + tensor_flops();
}

double CounterSum::intensity() const {
  return dram_bytes() > 0 ? flops() / dram_bytes() : kNaN;
}

double CounterSum::achieved_tflops() const {
  return seconds() > 0 ? flops() / seconds() / 1e12 : kNaN;
}

std::map<std::string, CounterSum> sum_by_kernel(const std::vector<LaunchCounters>& launches) {
  return sum_by(launches, [](const LaunchCounters& l) { return l.kernel; });
}

std::map<std::string, CounterSum> sum_by_op(const std::vector<LaunchCounters>& launches) {
  return sum_by(launches, [](const LaunchCounters& l) { return l.op; });
}

std::map<std::string, CounterSum> sum_by_op_kind(const std::vector<LaunchCounters>& launches) {
  return sum_by(launches, [](const LaunchCounters& l) { return op_kind_key(l.op); });
}

MetricValues net_of_replay(const MetricValues& launch, const MetricValues& baseline) {
  MetricValues net = launch;
  const auto at = [](Metric m) { return static_cast<std::size_t>(m); };
  const double raw = or_zero(launch[at(Metric::DramRead)]) + or_zero(launch[at(Metric::DramWrite)]);
  for (Metric m : {Metric::DramRead, Metric::DramWrite}) {
    if (!std::isnan(net[at(m)]) && !std::isnan(baseline[at(m)])) {
      net[at(m)] = std::max(0.0, net[at(m)] - baseline[at(m)]);
    }
  }
  const double kept = or_zero(net[at(Metric::DramRead)]) + or_zero(net[at(Metric::DramWrite)]);
  if (raw > 0) net[at(Metric::DramThroughput)] *= kept / raw;
  return net;
}

MetricValues median_values(const std::vector<MetricValues>& launches) {
  MetricValues median = no_values();
  const auto median_of = [](std::vector<double> v) { return tinyllama::median(std::move(v)); };
  for (std::size_t i = 0; i < kMetricCount; ++i) {
    std::vector<double> known;
    for (const MetricValues& l : launches) {
      if (!std::isnan(l[i])) known.push_back(l[i]);
    }
    if (!known.empty()) median[i] = median_of(known);
  }
  return median;
}

std::string no_counter_access_line(const std::string& call, const std::string& error) {
  return "hardware counters unavailable: this process may not read the GPU's performance "
         "counters (" +
         call + " returned " + error +
         "); the rest of the profile is complete. Run as root or load the driver with "
         "NVreg_RestrictProfilingToAdminUsers=0 (https://developer.nvidia.com/ERR_NVGPUCTRPERM)";
}

}  // namespace tinyllama::prof
