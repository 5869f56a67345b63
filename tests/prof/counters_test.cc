// Hardware counters on recorded values (no GPU needed): the sums per kernel
// and per op, the match of counter ranges to profiled kernels, the roofline
// placement, the CSV columns, the explain report and the "no access" line.
//
// The launch values are those CUPTI's range profiler recorded on an H200
// for the probe's known-work kernels (docs/log/2026-11-28.md, "CUPTI's
// range profiler on the device"): a 1 GiB copy and an FFMA loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "prof/counter_match.h"
#include "prof/counters.h"
#include "prof/kernel_explain.h"
#include "prof/kernel_stats.h"
#include "prof/recorded_counters.h"
#include "prof/roofline.h"

namespace tinyllama::prof {
namespace {

// recorded_copy with its (zero) FFMA count recorded.
MetricValues copy_with_ffma() {
  MetricValues v = recorded_copy();
  set(v, Metric::Ffma, 0);
  return v;
}

// The probe's FFMA loop: 8 858 370 048 FFMA, a few KB of DRAM.
MetricValues recorded_fma() {
  MetricValues v = no_values();
  set(v, Metric::Ffma, 8858370048.0);
  set(v, Metric::DramRead, 12288);
  set(v, Metric::DramWrite, 4096);
  set(v, Metric::L2HitRate, 90.0);
  set(v, Metric::DurationNs, 100000);
  return v;
}

TEST(Counters, MetricTableIsInMetricOrderWithDistinctNames) {
  const auto& table = metric_table();
  for (std::size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(static_cast<std::size_t>(table[i].metric), i) << table[i].cupti_name;
    for (std::size_t j = i + 1; j < table.size(); ++j) {
      EXPECT_STRNE(table[i].cupti_name, table[j].cupti_name);
      EXPECT_STRNE(table[i].label, table[j].label);
    }
  }
  EXPECT_EQ(metric_names().front(), "dram__bytes_read.sum");
  // A derived metric is not asked of CUPTI.
  const std::vector<std::string> names = metric_names();
  EXPECT_EQ(std::count(names.begin(), names.end(), ""), 0);
  EXPECT_EQ(names.size(), kMetricCount - 1);
}

// The DRAM pass's bytes, bandwidth share and time replace the replayed
// step's, launch by launch; every other metric is the replayed step's. A
// pass that launched another number of kernels changes nothing, and says so.
TEST(Counters, TheDramPassReplacesTheReplayedStepsDramValues) {
  const std::vector<MetricValues> replayed{recorded_copy(), recorded_fma()};
  MetricValues clean_copy = no_values();
  set(clean_copy, Metric::DramRead, 1073741824.0);
  set(clean_copy, Metric::DramWrite, 1073741824.0);
  set(clean_copy, Metric::DramThroughput, 80.0);
  set(clean_copy, Metric::DurationNs, 530000);
  MetricValues clean_fma = no_values();
  set(clean_fma, Metric::DramRead, 8192);
  set(clean_fma, Metric::DramWrite, 0);
  set(clean_fma, Metric::DramThroughput, 0.1);
  set(clean_fma, Metric::DurationNs, 99000);
  std::string note;
  const std::vector<MetricValues> merged = with_dram_pass(replayed, {clean_copy, clean_fma}, &note);
  EXPECT_TRUE(note.empty()) << note;
  ASSERT_EQ(merged.size(), 2u);
  for (Metric m : dram_pass_metrics()) {
    const auto i = static_cast<std::size_t>(m);
    EXPECT_EQ(merged[0][i], clean_copy[i]) << metric_info(m).label;
    EXPECT_EQ(merged[1][i], clean_fma[i]) << metric_info(m).label;
  }
  // The replayed reads stay, apart, for the cost model's check.
  const auto cold = static_cast<std::size_t>(Metric::DramReadReplayed);
  const auto read = static_cast<std::size_t>(Metric::DramRead);
  EXPECT_EQ(merged[0][cold], replayed[0][read]);
  CounterSum s;
  s.add(merged[0]);
  EXPECT_DOUBLE_EQ(s.dram_bytes(), 2 * 1073741824.0);
  EXPECT_DOUBLE_EQ(s.cold_dram_read_bytes(), replayed[0][read]);
  EXPECT_DOUBLE_EQ(s.dram_write_bytes(), 1073741824.0);
  const auto l2 = static_cast<std::size_t>(Metric::L2HitRate);
  EXPECT_EQ(merged[1][l2], replayed[1][l2]);
  const auto ffma = static_cast<std::size_t>(Metric::Ffma);
  EXPECT_EQ(merged[1][ffma], replayed[1][ffma]);

  const std::vector<MetricValues> kept = with_dram_pass(replayed, {clean_copy}, &note);
  EXPECT_NE(note.find("the DRAM pass launched 1 kernels, the counter step 2"), std::string::npos)
      << note;
  EXPECT_EQ(kept[0][read], replayed[0][read]);
  EXPECT_TRUE(std::isnan(kept[0][cold]));
}

TEST(Counters, BytesAddAndBandwidthIsBytesOverTime) {
  CounterSum s;
  s.add(copy_with_ffma());
  EXPECT_EQ(s.launches, 1);
  EXPECT_DOUBLE_EQ(s.dram_bytes(), 1073790720.0 + 1075718400.0);
  // 2 149 509 120 bytes in 536 448 ns: about 4007 GB/s, 83 % of the H200's 4800.
  EXPECT_NEAR(s.dram_gbps(), 4006.9, 0.1);
  EXPECT_DOUBLE_EQ(s.flops(), 0.0);
  EXPECT_TRUE(std::isnan(s.intensity()) || s.intensity() == 0.0);
}

TEST(Counters, PercentagesAreTimeWeightedAndCountsAdd) {
  CounterSum s;
  s.add(copy_with_ffma());
  s.add(recorded_fma());
  EXPECT_EQ(s.launches, 2);
  const double weighted = (51.34 * 536448 + 90.0 * 100000) / (536448 + 100000);
  EXPECT_NEAR(s.get(Metric::L2HitRate), weighted, 1e-9);
  EXPECT_NE(s.get(Metric::L2HitRate), (51.34 + 90.0) / 2);  // not the plain mean
  // Occupancy: only the copy reported it, so it is the copy's.
  EXPECT_DOUBLE_EQ(s.get(Metric::WarpsActive), 97.55);
  EXPECT_DOUBLE_EQ(s.fp32_flops(), 2 * 8858370048.0);
  EXPECT_DOUBLE_EQ(s.get(Metric::DurationNs), 636448.0);
  EXPECT_TRUE(std::isnan(s.get(Metric::HgmmaBf16)));  // no launch reported it
}

TEST(Counters, TensorOpsCountAsFlops) {
  MetricValues v = no_values();
  set(v, Metric::HgmmaBf16, 3e12);
  set(v, Metric::HmmaBf16, 1e12);
  set(v, Metric::Ffma, 5e9);
  set(v, Metric::DramRead, 1e9);
  set(v, Metric::DramWrite, 1e9);
  set(v, Metric::DurationNs, 8e6);
  CounterSum s;
  s.add(v);
  EXPECT_DOUBLE_EQ(s.tensor_flops(), 4e12);
  EXPECT_DOUBLE_EQ(s.flops(), 4e12 + 1e10);
  EXPECT_DOUBLE_EQ(s.intensity(), (4e12 + 1e10) / 2e9);
  EXPECT_NEAR(s.achieved_tflops(), (4e12 + 1e10) / 8e-3 / 1e12, 1e-9);
}

TEST(Counters, OpsSumOverLayersByKind) {
  std::vector<LaunchCounters> launches = {
      {"rmsnorm_kernel", "forward/layer0/rmsnorm", copy_with_ffma()},
      {"rmsnorm_kernel", "forward/layer1/rmsnorm", copy_with_ffma()},
      {"fma_kernel", "forward/layer1/swiglu", recorded_fma()}};
  const auto by_op = sum_by_op(launches);
  ASSERT_EQ(by_op.size(), 3u);
  const auto by_kind = sum_by_op_kind(launches);
  ASSERT_EQ(by_kind.count("forward/rmsnorm"), 1u);
  EXPECT_EQ(by_kind.at("forward/rmsnorm").launches, 2);
  EXPECT_DOUBLE_EQ(by_kind.at("forward/rmsnorm").dram_bytes(), 2 * (1073790720.0 + 1075718400.0));
  const auto by_kernel = sum_by_kernel(launches);
  EXPECT_EQ(by_kernel.at("rmsnorm_kernel").launches, 2);
  EXPECT_EQ(by_kernel.at("fma_kernel").launches, 1);
}

TEST(CounterMatch, RangesTakeTheLastProfiledStepsKernelsInOrder) {
  // Two profiled steps of three kernels each, handed over out of order.
  std::vector<ProfiledLaunch> profiled = {
      {"b", "forward/x", 2100}, {"a", "forward/w", 1000}, {"c", "optimizer/adamw", 3000},
      {"a", "forward/w", 2000}, {"b", "forward/x", 1100}, {"c", "optimizer/adamw", 1200}};
  std::vector<MetricValues> ranges = {copy_with_ffma(), recorded_fma(), copy_with_ffma()};
  const CounterMatch m = match_counter_ranges(profiled, 2, ranges);
  ASSERT_EQ(m.launches.size(), 3u) << m.note;
  EXPECT_EQ(m.launches[0].kernel, "a");
  EXPECT_EQ(m.launches[1].kernel, "b");
  EXPECT_EQ(m.launches[1].op, "forward/x");
  EXPECT_EQ(m.launches[2].kernel, "c");
  EXPECT_DOUBLE_EQ(m.launches[1].values[static_cast<std::size_t>(Metric::Ffma)], 8858370048.0);
}

TEST(CounterMatch, ADifferentKernelCountIsNotGuessed) {
  std::vector<ProfiledLaunch> profiled = {{"a", "x", 1}, {"b", "y", 2}, {"a", "x", 3}};
  const CounterMatch m = match_counter_ranges(profiled, 2, {copy_with_ffma(), recorded_fma()});
  EXPECT_TRUE(m.launches.empty());
  EXPECT_NE(m.note.find("launched 2 kernels"), std::string::npos) << m.note;
  EXPECT_NE(m.note.find("3 in all"), std::string::npos) << m.note;
  EXPECT_NE(match_counter_ranges(profiled, 2, {}).note.find("no ranges"), std::string::npos);
}

TEST(Roofline, PlacementBindsTheLowerRoof) {
  Roofs r;
  r.compute_tflops = 989;
  r.bandwidth_gbps = 4800;
  EXPECT_NEAR(r.ridge(), 989e12 / 4800e9, 1e-9);  // about 206 FLOPs per byte
  // 10 FLOPs per byte: the memory roof, 10 x 4.8 TB/s = 48 TFLOP/s.
  const RooflinePoint low = place_on_roofline("low", 1e12, 1e11, 0.1, r);
  ASSERT_TRUE(low.placed);
  EXPECT_DOUBLE_EQ(low.intensity, 10.0);
  EXPECT_NEAR(low.achieved_tflops, 10.0, 1e-12);
  EXPECT_NEAR(low.roof_tflops, 48.0, 1e-9);
  EXPECT_TRUE(low.memory_bound);
  EXPECT_NEAR(low.pct_of_roof, 100.0 * 10 / 48, 1e-9);
  // 500 FLOPs per byte: right of the ridge, the compute roof.
  const RooflinePoint high = place_on_roofline("high", 5e14, 1e12, 1.0, r);
  EXPECT_FALSE(high.memory_bound);
  EXPECT_DOUBLE_EQ(high.roof_tflops, 989.0);
  // No FLOPs (the copy): not placed.
  EXPECT_FALSE(place_on_roofline("copy", 0, 2e9, 1e-3, r).placed);
}

TEST(Roofline, ComputeRoofsScaleWithTheHeldClockAndMemoryDoesNot) {
  const auto h200 = find_device_peak("NVIDIA H200 (139.8 GiB, sm_90)");
  ASSERT_TRUE(h200.has_value());
  const Roofs rated = held_clock_roofs(h200, Precision::amp(DType::BF16), 0);
  const Roofs held = held_clock_roofs(h200, Precision::amp(DType::BF16), 1500);
  EXPECT_DOUBLE_EQ(rated.compute_tflops, h200->bf16_tflops);
  EXPECT_NEAR(held.compute_tflops, h200->bf16_tflops * 1500 / h200->tensor_clock_mhz, 1e-9);
  EXPECT_NEAR(held.fp32_tflops, h200->fp32_tflops * 1500 / h200->fp32_clock_mhz, 1e-9);
  EXPECT_DOUBLE_EQ(held.bandwidth_gbps, rated.bandwidth_gbps);
  EXPECT_FALSE(held_clock_roofs(std::nullopt, Precision::fp32(), 1500).known());
}

TEST(CountersCsv, CounterColumnsFollowTheRocprofColumns) {
  KernelStat copy{"copy_kernel", 4, 4 * 536448, 536000, 537000, 80.0};
  KernelStat other{"no_counters", 2, 1000, 400, 600, 20.0};
  std::map<std::string, CounterSum> counters;
  counters["copy_kernel"].add(copy_with_ffma());
  counters["copy_kernel"].add(copy_with_ffma());
  const std::string csv = kernel_stats_csv({copy, other}, &counters, 2);
  const auto header_end = csv.find('\n');
  const std::string header = csv.substr(0, header_end);
  EXPECT_EQ(header.rfind("Name,Calls,TotalDurationNs,AverageNs,Percentage,MinNs,MaxNs,", 0), 0u);
  EXPECT_NE(header.find("DramReadBytes"), std::string::npos);
  const std::string copy_row =
      csv.substr(header_end + 1, csv.find('\n', header_end + 1) - header_end - 1);
  // Two launches' bytes, over the kernel's profiled time per step (2 x 536 448 ns).
  EXPECT_NE(copy_row.find(",2,2.14758e+09,2.15144e+09,4006.9"), std::string::npos) << copy_row;
  const std::string other_row = csv.substr(csv.find("\"no_counters\""));
  EXPECT_NE(other_row.find(",,,,,,,,,,,,"), std::string::npos) << other_row;
  auto commas = [](const std::string& row) { return std::count(row.begin(), row.end(), ','); };
  EXPECT_EQ(commas(header), commas(copy_row));
  // Without counters, the rocprofv3 columns alone.
  EXPECT_EQ(kernel_stats_csv({copy}).find("Dram"), std::string::npos);
}

TEST(ReplayBaseline, DramBytesNetOfTheEmptyKernelsAndThroughputScaled) {
  MetricValues launch = recorded_copy();
  set(launch, Metric::DramThroughput, 80.0);
  MetricValues empty = no_values();
  set(empty, Metric::DramRead, 1.0e6);
  set(empty, Metric::DramWrite, 21.0e6);
  const MetricValues net = net_of_replay(launch, empty);
  EXPECT_DOUBLE_EQ(net[static_cast<std::size_t>(Metric::DramRead)], 1073790720 - 1.0e6);
  EXPECT_DOUBLE_EQ(net[static_cast<std::size_t>(Metric::DramWrite)], 1075718400 - 21.0e6);
  const double kept = (1073790720.0 + 1075718400.0 - 22.0e6) / (1073790720.0 + 1075718400.0);
  EXPECT_NEAR(net[static_cast<std::size_t>(Metric::DramThroughput)], 80.0 * kept, 1e-9);
  // Everything else as read.
  EXPECT_DOUBLE_EQ(net[static_cast<std::size_t>(Metric::L2HitRate)], 51.34);
  // A kernel writing less than the replay adds reads as zero, not negative.
  MetricValues small = no_values();
  set(small, Metric::DramRead, 0.5e6);
  set(small, Metric::DramWrite, 21.047e6);
  const MetricValues small_net = net_of_replay(small, empty);
  EXPECT_DOUBLE_EQ(small_net[static_cast<std::size_t>(Metric::DramRead)], 0.0);
  EXPECT_NEAR(small_net[static_cast<std::size_t>(Metric::DramWrite)], 47e3, 1e-3);
  // No baseline (NaN): the launch as read.
  const MetricValues same = net_of_replay(launch, no_values());
  EXPECT_DOUBLE_EQ(same[static_cast<std::size_t>(Metric::DramWrite)], 1075718400);
}

TEST(ReplayBaseline, MedianPerMetricOverTheKnownValues) {
  MetricValues a = no_values(), b = no_values(), c = no_values();
  set(a, Metric::DramWrite, 20e6);
  set(b, Metric::DramWrite, 22e6);
  set(c, Metric::DramWrite, 21e6);
  set(a, Metric::DramRead, 3.0);  // known in two launches only: their mean
  set(c, Metric::DramRead, 5.0);
  const MetricValues m = median_values({a, b, c});
  EXPECT_DOUBLE_EQ(m[static_cast<std::size_t>(Metric::DramWrite)], 21e6);
  EXPECT_DOUBLE_EQ(m[static_cast<std::size_t>(Metric::DramRead)], 4.0);
  EXPECT_TRUE(std::isnan(m[static_cast<std::size_t>(Metric::L2HitRate)]));
}

TEST(CountersCsv, OneRowPerLaunchInOrderWithItsOp) {
  MetricValues second = recorded_copy();
  set(second, Metric::DramRead, 12345);
  const std::string csv =
      counter_launches_csv({{"copy_kernel", "forward/layer0/attn_norm", recorded_copy()},
                            {"void k<\"x\">()", "optimizer/adamw", second}});
  std::vector<std::string> rows;
  for (std::size_t at = 0, end; (end = csv.find('\n', at)) != std::string::npos; at = end + 1) {
    rows.push_back(csv.substr(at, end - at));
  }
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].rfind("Index,Kernel,Op,dram_read_bytes,dram_write_bytes,", 0), 0u);
  EXPECT_EQ(
      rows[1].rfind("0,\"copy_kernel\",\"forward/layer0/attn_norm\",1073790720,1075718400,", 0), 0u)
      << rows[1];
  EXPECT_EQ(rows[2].rfind("1,\"void k<\"\"x\"\">()\",\"optimizer/adamw\",12345,", 0), 0u)
      << rows[2];
  auto commas = [](const std::string& row) { return std::count(row.begin(), row.end(), ','); };
  EXPECT_EQ(commas(rows[0]), commas(rows[1]));
  EXPECT_EQ(commas(rows[0]), commas(rows[2]));  // unknown metrics are empty cells
}

TEST(KernelExplain, FindsByRankOrNameAndSaysWhyNot) {
  std::vector<KernelStat> stats = {{"void gemm_bf16<128>()", 1, 10, 10, 10, 60},
                                   {"void adamw_kernel<float>()", 1, 5, 5, 5, 40}};
  std::string why;
  EXPECT_EQ(find_kernel(stats, "2", &why), 1);
  EXPECT_EQ(find_kernel(stats, "adamw", &why), 1);
  EXPECT_EQ(find_kernel(stats, "gemm", &why), 0);
  EXPECT_EQ(find_kernel(stats, "3", &why), -1);
  EXPECT_NE(why.find("2 distinct kernels"), std::string::npos) << why;
  EXPECT_EQ(find_kernel(stats, "softmax", &why), -1);
  EXPECT_NE(why.find("no profiled kernel"), std::string::npos) << why;
}

TEST(KernelExplain, EveryCounterWithItsMeaningAndTheRoofAbove) {
  KernelExplainInput in;
  in.name = "copy_kernel";
  in.rank = 1;
  in.profiled_ns_per_step = 536448;
  in.calls_per_step = 1;
  MetricValues v = copy_with_ffma();
  set(v, Metric::Fadd, 268435456);  // one add per float: intensity 1/8 FLOP per byte
  in.counters.add(v);
  in.roofs.compute_tflops = 989;
  in.roofs.bandwidth_gbps = 4800;
  const std::string text = explain_kernel(in);
  for (const MetricInfo& m : metric_table()) {
    EXPECT_NE(text.find(m.label), std::string::npos) << m.label;
    EXPECT_NE(text.find(m.meaning), std::string::npos) << m.label;
    EXPECT_NE(text.find(m.limit), std::string::npos) << m.label;
  }
  EXPECT_NE(text.find("51.34 %"), std::string::npos) << text;
  EXPECT_NE(text.find("1073.79 MB"), std::string::npos) << text;
  EXPECT_NE(text.find("of the memory roof"), std::string::npos) << text;
  EXPECT_NE(text.find("DRAM 4007 GB/s"), std::string::npos) << text;
  // 83 % of the bandwidth: close to the roof.
  EXPECT_NE(text.find("close to the memory roof"), std::string::npos) << text;
}

TEST(NoCounterAccess, OneLineNamingTheCallTheErrorAndTheFix) {
  const std::string line = no_counter_access_line("cuptiProfilerGetCounterAvailability",
                                                  "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NE(line.find("cuptiProfilerGetCounterAvailability"), std::string::npos);
  EXPECT_NE(line.find("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"), std::string::npos);
  EXPECT_NE(line.find("rest of the profile is complete"), std::string::npos);
  EXPECT_NE(line.find("ERR_NVGPUCTRPERM"), std::string::npos);
}

}  // namespace
}  // namespace tinyllama::prof
