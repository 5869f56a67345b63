#pragma once
// Hardware counters of one step's kernels (issue 44): which metrics CUPTI's
// range profiler is asked for, what each means, and the sums the profile
// reports -- per kernel launch, per kernel name and per op. Plain data and
// arithmetic, so everything past the collection (counter_collector.h) is
// tested without a GPU on recorded values.
//
// The metric names are those checked on an H200 (GH100) by
// scripts/probes/cupti_range_probe against ncu (docs/log/2026-11-28.md).
// Together they cost 5 replay passes per kernel; sm__throughput (8 passes
// alone) is left out, and "SM active" (sm__cycles_active) stands for the
// SM's utilisation instead.
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tinyllama::prof {

enum class Metric : std::size_t {
  DramRead,        // bytes read from device memory
  DramWrite,       // bytes written to device memory
  L2HitRate,       // % of L2 sector lookups that hit
  SmActive,        // % of elapsed cycles with a warp on the SM (SM utilisation)
  WarpsActive,     // achieved occupancy: % of the SM's warp slots in use while active
  TensorActive,    // % of active cycles the tensor pipe was busy
  DramThroughput,  // % of the DRAM's peak bandwidth over the kernel's time
  Ffma,            // fp32 fused multiply-adds, thread instructions (2 FLOPs each)
  Fadd,            // fp32 adds (1 FLOP)
  Fmul,            // fp32 multiplies (1 FLOP)
  HgmmaBf16,       // tensor math ops, Hopper wgmma, bf16 inputs
  HgmmaFp16,       // likewise fp16
  HgmmaTf32,       // likewise tf32
  HmmaBf16,        // tensor math ops, mma.sync (HMMA), bf16 inputs
  HmmaFp16,        // likewise fp16 into fp32
  HmmaTf32,        // likewise tf32
  DurationNs,      // the kernel's time in the replay (gpu__time_duration)
  // Derived, not asked of CUPTI: DramRead as the replayed passes read it
  // (each kernel's inputs from DRAM, as ncu's default cache flush measures),
  // kept when the DRAM pass's in-step bytes replace DramRead (with_dram_pass).
  DramReadReplayed,
  kCount
};
inline constexpr std::size_t kMetricCount = static_cast<std::size_t>(Metric::kCount);

struct MetricInfo {
  Metric metric;
  const char* cupti_name;  // as CUPTI and ncu spell it; "" for a derived metric
  const char* label;       // short column name: "dram_read_bytes"
  const char* unit;        // "bytes", "%", "inst", "ops", "ns"
  const char* meaning;     // one line: what the counter reads
  const char* limit;       // one line: which limit a high or low value points at
  bool percentage;         // averaged over launches (weighted by time), not summed
};

// Every metric, in Metric's order.
const std::array<MetricInfo, kMetricCount>& metric_table();
const MetricInfo& metric_info(Metric m);
// The CUPTI names, in Metric's order: what the collector asks for (the
// derived metrics have none).
std::vector<std::string> metric_names();
std::vector<std::string> metric_names(const std::vector<Metric>& metrics);
// Every metric CUPTI is asked for, in Metric's order.
std::vector<Metric> all_metrics();

// One metric value per Metric; NaN where CUPTI gave none.
using MetricValues = std::array<double, kMetricCount>;
MetricValues no_values();

// The DRAM pass (issue 44): a second counter step, where one follows the
// first, collects the DRAM traffic and the kernels' time alone, in one
// pass, which CUPTI does not replay. So its bytes are those of the step as
// it runs: a kernel finds in L2 what the kernels before it left there, and
// writes back their dirty lines, byte for byte as ncu measures without its
// cache flush. The replayed passes instead restore device memory before
// each later pass, which leaves the L2 full of dirty lines whose write-back
// lands in the kernel (about 20 MB a launch on an H200), and their reads
// come from DRAM as under ncu's default flush. The DRAM pass's values
// replace the replayed ones; the replayed reads stay as DramReadReplayed,
// what the cost model's bytes (every input from DRAM) are checked against.
const std::vector<Metric>& dram_pass_metrics();

// The counter step's ranges with the DRAM pass's metrics taken from `dram`,
// launch by launch. Unchanged, with *note saying why, when the two steps
// launched different numbers of kernels.
std::vector<MetricValues> with_dram_pass(std::vector<MetricValues> ranges,
                                         const std::vector<MetricValues>& dram, std::string* note);

// The sums over some launches (one kernel name's, one op's): counts and
// bytes added, percentages averaged weighted by each launch's duration.
struct CounterSum {
  std::int64_t launches = 0;
  MetricValues values = no_values();

  double get(Metric m) const { return values[static_cast<std::size_t>(m)]; }
  void add(const MetricValues& launch);

  double dram_bytes() const;  // read + written
  double dram_write_bytes() const;
  // Read as every input came from DRAM (DramReadReplayed, else DramRead):
  // what the cost model's reads count.
  double cold_dram_read_bytes() const;
  double dram_gbps() const;        // dram_bytes over the kernels' replay time, GB/s
  double fp32_flops() const;       // 2 FFMA + FADD + FMUL
  double tensor_flops() const;     // every tensor math op (one op = one FLOP: ncu's roofline)
  double flops() const;            // the two together
  double intensity() const;        // flops per DRAM byte; NaN without bytes
  double achieved_tflops() const;  // flops over the replay time
  double seconds() const;          // the replay time

 private:
  MetricValues weighted_{};  // percentages: sum of value x weight
  MetricValues weights_{};
};

// One launch of the counter step, matched to the profiled kernel it stands
// for (by position: counter_match.h).
struct LaunchCounters {
  std::string kernel;  // demangled name
  std::string op;      // the op path that launched it ("forward/layer3/qkv_gemm")
  MetricValues values = no_values();
};

// Kernel replay saves device memory before a kernel's first pass and
// restores it before each later one. Should that traffic land inside a
// kernel's range, it would read as the kernel's own DRAM bytes. The
// collector measures it on an empty kernel replayed the same way (on an
// H200 with CUDA 13: 2.6 KB read and nothing written a launch) and a
// launch's DRAM bytes are taken net of it (clamped at zero), the DRAM
// throughput scaled to match.
MetricValues net_of_replay(const MetricValues& launch, const MetricValues& baseline);

// The metric-wise median of some launches (the baseline kernel's).
MetricValues median_values(const std::vector<MetricValues>& launches);

// Per kernel name and per op path, over one step.
std::map<std::string, CounterSum> sum_by_kernel(const std::vector<LaunchCounters>& launches);
std::map<std::string, CounterSum> sum_by_op(const std::vector<LaunchCounters>& launches);
// Per op kind ("forward/qkv_gemm": summed over layers), the cost model's key.
std::map<std::string, CounterSum> sum_by_op_kind(const std::vector<LaunchCounters>& launches);

// The one line a profile prints when this process may not read the GPU's
// counters: call is the CUPTI function that refused, error its result name.
std::string no_counter_access_line(const std::string& call, const std::string& error);

}  // namespace tinyllama::prof
