// The profiler's communication figures from hand-made records (no GPU, no
// NCCL needed): which kernels are NCCL's, how much of each one compute on
// another stream hid, the sums per op in the summary and its text, and the
// trace's per-kernel figure.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/test_plans.h"
#include "prof/attribution.h"
#include "prof/communication.h"
#include "prof/profile_summary.h"
#include "prof/trace_writer.h"
#include "prof_test_ranges.h"
#include "profile_inputs.h"

namespace tinyllama::prof {
namespace {

using nlohmann::json;

constexpr const char* kAllReduce = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgs4K)";
constexpr const char* kReduceScatter =
    "_Z43ncclDevKernel_ReduceScatter_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE";
constexpr const char* kGemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n";

KernelRecord kernel(const char* name, std::int64_t start, std::int64_t end, std::uint32_t stream,
                    std::uint32_t correlation = 0, std::uint32_t device = 0) {
  KernelRecord k;
  k.name = name;
  k.start_ns = start;
  k.end_ns = end;
  k.stream = stream;
  k.correlation = correlation;
  k.device = device;
  return k;
}

std::vector<std::int64_t> hidden_of(const std::vector<KernelRecord>& kernels) {
  return hidden_behind_compute(kernels, communication_kernels(kernels));
}

TEST(Communication, NcclKernelsByNameMangledOrNot) {
  EXPECT_TRUE(is_communication_kernel(kAllReduce));
  EXPECT_TRUE(is_communication_kernel(kReduceScatter));
  EXPECT_TRUE(is_communication_kernel("ncclDevKernel_AllGather_RING_LL"));
  EXPECT_TRUE(is_communication_kernel("NCCLKernel_legacy"));  // any case
  // NCCL's reduction for a one-rank averaging collective (--gpus 1).
  EXPECT_TRUE(
      is_communication_kernel("_ZN12_GLOBAL__N_113oneRankReduceI13FuncPreMulSumIfEEEvPvS3_mmb"));
  // As CUPTI reported it on the H100 (NCCL 2.28): nvcc's prefix for a
  // kernel of internal linkage, then the mangled name.
  EXPECT_TRUE(is_communication_kernel(
      "__nv_static_32__b4148644_10_onerank_cu_fdf47990__ZN43_GLOBAL__N__b4148644_10_onerank_cu_"
      "fdf4799013oneRankReduceI13FuncPreMulSumIfEEEvPvS3_mmb"));
  EXPECT_FALSE(is_communication_kernel("__nv_static_32__b4148644_10_rope_cu_fdf47990__Z4ropePf"));
  EXPECT_FALSE(is_communication_kernel(kGemm));
  EXPECT_FALSE(is_communication_kernel("void tinyllama::cuda::adamw_kernel<float>(float*)"));
  EXPECT_FALSE(is_communication_kernel("fused_nccl_like_kernel"));  // "nccl" not at the start
  EXPECT_FALSE(is_communication_kernel("ncc"));
  EXPECT_FALSE(is_communication_kernel(""));
  EXPECT_EQ(communication_kernels(
                {kernel(kGemm, 0, 1, 1), kernel(kAllReduce, 0, 1, 2), kernel(kGemm, 0, 1, 1)}),
            (std::vector<bool>{false, true, false}));
}

TEST(Communication, FullyPartlyAndNotHidden) {
  const std::vector<KernelRecord> k = {
      kernel(kGemm, 0, 1000, 7),         // compute on stream 7
      kernel(kAllReduce, 100, 400, 9),   // inside it: fully hidden
      kernel(kAllReduce, 900, 1200, 9),  // 100 of 300 under it
      kernel(kAllReduce, 1500, 1600, 9)  // alone
  };
  EXPECT_EQ(hidden_of(k), (std::vector<std::int64_t>{0, 300, 100, 0}));
}

// Kernels on the communication kernel's own stream are ordered with it
// (their records may still touch by a few ns), and another GPU's compute
// hides nothing on this one.
TEST(Communication, SameStreamAndOtherDevicesDoNotHide) {
  const std::vector<KernelRecord> k = {
      kernel(kGemm, 0, 110, 9),  // ends 10 ns into the NCCL kernel, same stream
      kernel(kAllReduce, 100, 300, 9),
      kernel(kGemm, 0, 1000, 7, 0, /*device=*/1),
  };
  EXPECT_EQ(hidden_of(k), (std::vector<std::int64_t>{0, 0, 0}));
}

// Overlapping NCCL kernels on two streams hide nothing of each other; the
// compute that runs beside both hides each of them.
TEST(Communication, OverlappingNcclKernelsHideOnlyBehindCompute) {
  const std::vector<KernelRecord> k = {
      kernel(kAllReduce, 0, 100, 8),
      kernel(kReduceScatter, 50, 200, 9),
      kernel(kGemm, 80, 120, 7),
  };
  EXPECT_EQ(hidden_of(k), (std::vector<std::int64_t>{20, 40, 0}));
}

// Compute on several streams: the time any of them ran, counted once.
TEST(Communication, SeveralComputeStreamsCountOnce) {
  const std::vector<KernelRecord> k = {
      kernel(kAllReduce, 0, 1000, 9),
      kernel(kGemm, 100, 300, 7),
      kernel(kGemm, 200, 400, 8),  // overlaps the first: [100, 400) in all
      kernel(kGemm, 250, 260, 6),  // inside both
      kernel(kGemm, 600, 700, 8),
      kernel(kGemm, 700, 750, 7),  // touches the one before: [600, 750)
      kernel(kGemm, 990, 1500, 6),
  };
  EXPECT_EQ(hidden_of(k)[0], 300 + 150 + 10);
}

TEST(Communication, EmptyAndBackwardsRecordsHideNothing) {
  EXPECT_TRUE(hidden_of({}).empty());
  const std::vector<KernelRecord> k = {
      kernel(kAllReduce, 100, 100, 9),  // zero length
      kernel(kAllReduce, 300, 200, 9),  // end before start
      kernel(kGemm, 0, 1000, 7),
      kernel(kGemm, 500, 400, 6),  // a backwards compute record covers nothing
      kernel(kAllReduce, 450, 460, 9),
  };
  EXPECT_EQ(hidden_of(k), (std::vector<std::int64_t>{0, 0, 0, 0, 10}));
}

// One data-parallel step: loss_reduce, and a grad_exchange per layer beside
// the backward pass of the layers below, each NCCL kernel launched inside
// its op's range; compute on streams 7 and 8, NCCL on 9.
struct DataParallelStep {
  std::vector<HostRange> ranges;
  GpuActivity gpu;

  DataParallelStep() {
    const int step = add_range(ranges, "step", -1, 0, 1000);
    add_range(ranges, "loss_reduce", step, 10, 20);
    const int bwd = add_range(ranges, "backward", step, 100, 900);
    const int l1 = add_range(ranges, "layer1", bwd, 100, 500);
    add_range(ranges, "down_gemm_wgrad", l1, 110, 150);
    add_range(ranges, "grad_exchange", l1, 150, 200);
    const int l0 = add_range(ranges, "layer0", bwd, 500, 900);
    add_range(ranges, "down_gemm_wgrad", l0, 510, 550);
    add_range(ranges, "grad_exchange", l0, 550, 600);
    for (auto [at, correlation] :
         {std::pair{15, 1}, {120, 2}, {160, 3}, {520, 4}, {530, 6}, {560, 5}}) {
      gpu.api_calls.push_back(
          {"cuLaunchKernelEx", at, at + 5, static_cast<std::uint32_t>(correlation), 1});
    }
    // Kernel times in microseconds, so the printed milliseconds show.
    auto at_us = [](const char* name, std::int64_t start, std::int64_t end, std::uint32_t stream,
                    std::uint32_t correlation) {
      return kernel(name, start * 1000, end * 1000, stream, correlation);
    };
    gpu.kernels = {
        at_us(kAllReduce, 1000, 1100, 9, 1),      // loss_reduce: 30 us hidden (below)
        at_us(kGemm, 1100, 1500, 7, 2),           // layer1's wgrad
        at_us(kReduceScatter, 1400, 1600, 9, 3),  // layer1: 100 + 50 of 200 hidden
        at_us(kGemm, 1550, 1700, 7, 4),           // layer0's wgrad
        at_us(kReduceScatter, 1700, 1800, 9, 5),  // layer0: all 100 hidden by stream 8
        at_us(kGemm, 1650, 1850, 8, 6),
        // Not launched in the step (no API record, started after it): the
        // compute still hides, the NCCL kernel is not counted.
        at_us(kGemm, 1050, 1080, 7, 97),
        at_us(kAllReduce, 6000, 6100, 9, 98),
    };
  }
};

TEST(Communication, FiguresPerOpOverTheProfiledSteps) {
  const DataParallelStep s;
  const Attribution a = attribute(s.ranges, &s.gpu);
  EXPECT_EQ(a.kernel_ops[2], "backward/layer1/grad_exchange");
  const CommunicationFigures f = communication_figures(s.gpu, a);
  EXPECT_EQ(f.total.kernels, 3);
  EXPECT_EQ(f.total.kernel_ns, (100 + 200 + 100) * 1000);
  EXPECT_EQ(f.total.hidden_ns, (30 + 150 + 100) * 1000);
  ASSERT_EQ(f.by_op.size(), 2u);
  const CommunicationTime& exchange = f.by_op.at("backward/grad_exchange");
  EXPECT_EQ(exchange.kernels, 2);
  EXPECT_EQ(exchange.kernel_ns, 300'000);
  EXPECT_EQ(exchange.hidden_ns, 250'000);
  const CommunicationTime& loss = f.by_op.at("loss_reduce");
  EXPECT_EQ(loss.kernels, 1);
  EXPECT_EQ(loss.hidden_ns, 30'000);
}

ProfileInputs inputs(const DataParallelStep& s, bool data_parallel) {
  ProfileInputs in = tiny_h100_inputs(Precision::amp(DType::BF16));
  in.plan.parallel.enabled = data_parallel;
  in.ranges = s.ranges;
  in.gpu = &s.gpu;
  return in;
}

TEST(Communication, SummaryJsonTextAndOpRows) {
  const DataParallelStep s;
  const ProfileInputs in = inputs(s, true);
  const json j = profile_summary(in, attribute(in.ranges, in.gpu), {});
  const json& c = j["communication"];
  EXPECT_DOUBLE_EQ(c["kernels_per_step"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(c["ms_per_step"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(c["hidden_ms_per_step"].get<double>(), 0.28);
  EXPECT_DOUBLE_EQ(c["hidden_pct"].get<double>(), 70.0);
  ASSERT_EQ(c["ops"].size(), 2u);
  EXPECT_EQ(c["ops"][0]["op"], "backward/grad_exchange");  // the larger first
  EXPECT_DOUBLE_EQ(c["ops"][0]["hidden_pct"].get<double>(), 100.0 * 250 / 300);
  EXPECT_EQ(c["ops"][1]["op"], "loss_reduce");
  EXPECT_NE(j["notes"].dump().find("wait for the slowest rank"), std::string::npos);

  // The op table sums grad_exchange over the layers, as it does the
  // modelled ops; the instances keep one row per layer.
  int exchange_rows = 0;
  for (const json& o : j["ops"]) {
    const std::string op = o["op"];
    EXPECT_EQ(op.find("layer"), std::string::npos) << op;
    if (op == "backward/grad_exchange") {
      ++exchange_rows;
      EXPECT_DOUBLE_EQ(o["gpu_ms_per_step"].get<double>(), 0.3);
      EXPECT_DOUBLE_EQ(o["kernels_per_step"].get<double>(), 2.0);
      EXPECT_DOUBLE_EQ(o["host_ms_per_step"].get<double>(), 100e-6);  // two 50 ns ranges
    }
  }
  EXPECT_EQ(exchange_rows, 1);
  int exchange_instances = 0;
  for (const json& o : j["op_instances"]) {
    exchange_instances += o["op"].get<std::string>().find("/grad_exchange") != std::string::npos;
  }
  EXPECT_EQ(exchange_instances, 2);

  const std::string text = format_profile_summary(j);
  EXPECT_NE(text.find("  comm      3 NCCL kernels/step, 0.400 ms/step, 0.280 ms (70.0 %) hidden "
                      "behind compute\n"
                      "            backward/grad_exchange              2 kernels    0.300 ms, "
                      "0.250 ms (83.3 %) hidden behind compute\n"
                      "            loss_reduce                         1 kernels    0.100 ms, "
                      "0.030 ms (30.0 %) hidden behind compute\n"),
            std::string::npos)
      << text;
}

// Every op row says how much of its kernel time ran beside another
// stream's kernels: the wgrad GEMMs beside the collectives and each other.
TEST(Communication, OpRowsSayHowMuchRanBesideOtherStreams) {
  const DataParallelStep s;
  const ProfileInputs in = inputs(s, true);
  const json j = profile_summary(in, attribute(in.ranges, in.gpu), {});
  bool found = false;
  for (const json& o : j["ops"]) {
    if (o["op"] != "backward/down_gemm_wgrad") continue;
    found = true;
    // [1100, 1500) on stream 7: [1400, 1500) beside stream 9's kernel;
    // [1550, 1700) on 7: 50 beside 9, 50 beside 8; [1650, 1850) on 8: 150
    // beside streams 7 and 9 (counted once).
    EXPECT_DOUBLE_EQ(o["gpu_ms_per_step"].get<double>(), 0.75);
    EXPECT_DOUBLE_EQ(o["beside_other_streams_ms_per_step"].get<double>(), 0.35);
    EXPECT_NEAR(o["beside_other_streams_pct"].get<double>(), 100.0 * 350 / 750, 1e-9);
  }
  EXPECT_TRUE(found);
  const std::string text = format_profile_summary(j);
  EXPECT_NE(text.find("  bound  beside %\n"), std::string::npos) << text;
  // Its row: 0.750 ms, 3 kernels a step, ..., 47 % beside other streams.
  const std::size_t row = text.find("    backward/down_gemm_wgrad");
  ASSERT_NE(row, std::string::npos) << text;
  const std::string line = text.substr(row, text.find('\n', row) - row);
  EXPECT_NE(line.find("   0.750       3 "), std::string::npos) << line;
  EXPECT_EQ(line.substr(line.size() - 3), " 47") << line;

  // Without kernel statistics the figure is absent, not zero.
  ProfileInputs host_only = inputs(s, true);
  host_only.gpu = nullptr;
  const json h = profile_summary(host_only, attribute(host_only.ranges, nullptr), {});
  for (const json& o : h["ops"]) EXPECT_TRUE(o["beside_other_streams_pct"].is_null()) << o["op"];
}

TEST(Communication, NoNcclKernelsNoLineAndANoteWhenDataParallel) {
  DataParallelStep s;
  std::erase_if(s.gpu.kernels,
                [](const KernelRecord& k) { return is_communication_kernel(k.name); });
  const json single = profile_summary(inputs(s, false), attribute(s.ranges, &s.gpu), {});
  EXPECT_DOUBLE_EQ(single["communication"]["kernels_per_step"].get<double>(), 0.0);
  EXPECT_TRUE(single["communication"]["hidden_pct"].is_null());
  EXPECT_TRUE(single["communication"]["ops"].empty());
  EXPECT_EQ(format_profile_summary(single).find("  comm  "), std::string::npos);
  EXPECT_EQ(single["notes"].dump().find("no NCCL kernel"), std::string::npos);

  const json parallel = profile_summary(inputs(s, true), attribute(s.ranges, &s.gpu), {});
  EXPECT_NE(parallel["notes"].dump().find("no NCCL kernel ran"), std::string::npos);

  ProfileInputs cpu = inputs(s, false);
  cpu.backend = "cpu";
  cpu.gpu = nullptr;
  EXPECT_TRUE(profile_summary(cpu, attribute(cpu.ranges, nullptr), {})["communication"].is_null());
}

TEST(Communication, TraceGivesEachNcclKernelItsHiddenTime) {
  const DataParallelStep s;
  const ProfileInputs in = inputs(s, true);
  const json trace = chrome_trace(in, attribute(in.ranges, in.gpu));
  std::vector<double> hidden_us;
  int compute_kernels = 0;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] != "kernel") continue;
    if (e["args"].contains("hidden_behind_compute_us")) {
      hidden_us.push_back(e["args"]["hidden_behind_compute_us"].get<double>());
    } else {
      ++compute_kernels;
    }
  }
  EXPECT_EQ(hidden_us, (std::vector<double>{30.0, 150.0, 100.0}));
  EXPECT_EQ(compute_kernels, 3);
}

}  // namespace
}  // namespace tinyllama::prof
