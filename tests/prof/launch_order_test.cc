// Eager steps profiled without CUPTI's API records: the launch order learnt
// from a warm-up step that had them places each later record by its
// correlation id (launch order) alone, and anything that does not follow
// the order is refused rather than guessed. Hand-made records, no GPU.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "prof/attribution.h"
#include "prof/launch_order.h"
#include "prof/profile_summary.h"
#include "prof/trace_writer.h"
#include "prof_test_ranges.h"

namespace tinyllama::prof {
namespace {

KernelRecord kernel(const std::string& name, std::int64_t start, std::uint32_t correlation,
                    std::uint64_t graph_node = 0) {
  KernelRecord k;
  k.name = name;
  k.start_ns = start;
  k.end_ns = start + 10;
  k.stream = 7;
  k.correlation = correlation;
  k.graph_node = graph_node;
  return k;
}

TransferRecord copy(std::int64_t start, std::uint32_t correlation) {
  TransferRecord x;
  x.name = "memcpy HtoD";
  x.start_ns = start;
  x.end_ns = start + 5;
  x.bytes = 64;
  x.stream = 7;
  x.correlation = correlation;
  return x;
}

// One step at `base`: an input copy in the step itself, two kernels in
// forward/layer0/qkv_gemm (a GEMM and its split-K reduction), one in
// backward/layer0/attention.
void add_step(std::vector<HostRange>& r, std::int64_t base) {
  const int step = add_range(r, "step", -1, base, base + 1000);
  const int fwd = add_range(r, "forward", step, base + 100, base + 400);
  const int layer = add_range(r, "layer0", fwd, base + 110, base + 390);
  add_range(r, "qkv_gemm", layer, base + 120, base + 300);
  const int bwd = add_range(r, "backward", step, base + 400, base + 900);
  const int blayer = add_range(r, "layer0", bwd, base + 410, base + 890);
  add_range(r, "attention", blayer, base + 420, base + 800);
}

// The warm-up's records: step 4's launches have API records inside its
// ranges (the only ones still held); a kernel of step 3, whose ranges were
// dropped, runs during step 4 and must not be learnt.
struct Warmup {
  std::vector<HostRange> ranges;
  GpuActivity gpu;
  Warmup() {
    add_step(ranges, 10000);
    gpu.api_calls = {{"cudaMemcpyAsync", 10010, 10015, 500, 1},
                     {"cuLaunchKernelEx", 10130, 10135, 501, 1},
                     {"cudaLaunchKernel", 10140, 10145, 502, 1},
                     {"cudaLaunchKernel", 10430, 10435, 503, 1},
                     {"cudaLaunchKernel", 9000, 9005, 400, 1}};
    // Out of order on purpose: CUPTI hands records over by buffer.
    gpu.kernels = {kernel("attn_bwd", 10600, 503), kernel("gemm", 10300, 501),
                   kernel("splitk_reduce", 10400, 502), kernel("step3_tail", 10050, 400)};
    gpu.transfers = {copy(10100, 500)};
  }
};

TEST(LaunchOrder, LearntFromTheLastWarmupStepInLaunchOrder) {
  const Warmup w;
  std::string why;
  const auto order = learn_launch_order(w.ranges, w.gpu, &why);
  ASSERT_TRUE(order.has_value()) << why;
  ASSERT_EQ(order->launches.size(), 4u);
  const std::vector<std::string> names = {"memcpy HtoD", "gemm", "splitk_reduce", "attn_bwd"};
  const std::vector<std::string> ops = {"", "forward/layer0/qkv_gemm", "forward/layer0/qkv_gemm",
                                        "backward/layer0/attention"};
  const std::vector<int> offsets = {0, 3, 3, 6};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(order->launches[i].name, names[i]) << i;
    EXPECT_EQ(order->launches[i].op, ops[i]) << i;
    EXPECT_EQ(order->launches[i].range_offset, offsets[i]) << i;
    EXPECT_EQ(order->launches[i].kernel, i != 0) << i;
  }
}

TEST(LaunchOrder, NotLearntFromAGraphAnUntracedLaunchOrNoStep) {
  std::string why;
  Warmup graph;
  graph.gpu.kernels[1].graph_node = 42;
  EXPECT_FALSE(learn_launch_order(graph.ranges, graph.gpu, &why).has_value());
  EXPECT_EQ(why, kReplaysAGraph);

  Warmup untraced;  // a kernel that ran inside the step with no API record
  untraced.gpu.kernels.push_back(kernel("mystery", 10500, 777));
  EXPECT_FALSE(learn_launch_order(untraced.ranges, untraced.gpu, &why).has_value());
  EXPECT_NE(why.find("no launch record"), std::string::npos) << why;

  Warmup none;
  none.ranges.clear();
  EXPECT_FALSE(learn_launch_order(none.ranges, none.gpu, &why).has_value());
  EXPECT_NE(why.find("no warm-up step"), std::string::npos) << why;
}

// Two profiled steps recorded without API calls, plus the first launch of
// the next (unprofiled) step, which the trainer enqueued before the last
// profiled one finished.
struct Profiled {
  std::vector<HostRange> ranges;
  GpuActivity gpu;
  Profiled() {
    add_step(ranges, 0);
    add_step(ranges, 2000);
    // Kernel start times deliberately say nothing useful: the second
    // step's GEMM runs while the first step's range is still open.
    gpu.kernels = {kernel("gemm", 900, 11),           kernel("splitk_reduce", 1100, 12),
                   kernel("attn_bwd", 1900, 13),      kernel("gemm", 950, 21),
                   kernel("splitk_reduce", 2500, 22), kernel("attn_bwd", 2900, 23),
                   kernel("next_step", 3100, 31)};
    gpu.transfers = {copy(50, 10), copy(2010, 20)};
  }
};

TEST(LaunchOrder, PlacesEachProfiledRecordByItsPlaceInTheOrder) {
  const Warmup w;
  std::string why;
  const auto order = learn_launch_order(w.ranges, w.gpu, &why);
  ASSERT_TRUE(order.has_value()) << why;
  const Profiled p;
  const Attribution a = attribute(p.ranges, &p.gpu, &*order);
  EXPECT_TRUE(a.launch_order_note.empty()) << a.launch_order_note;
  EXPECT_EQ(a.by_launch_order, 8);
  const std::vector<std::string> expected = {"forward/layer0/qkv_gemm",
                                             "forward/layer0/qkv_gemm",
                                             "backward/layer0/attention",
                                             "forward/layer0/qkv_gemm",
                                             "forward/layer0/qkv_gemm",
                                             "backward/layer0/attention",
                                             kUnattributed};
  EXPECT_EQ(a.kernel_ops, expected);
  EXPECT_EQ(a.kernel_in_step, (std::vector<bool>{true, true, true, true, true, true, false}));
  // The second step's ranges start at index 7: its GEMM came from range 10.
  EXPECT_EQ(a.kernel_range, (std::vector<int>{3, 3, 6, 10, 10, 13, -1}));
  EXPECT_EQ(a.transfer_ops, (std::vector<std::string>{kStepOp, kStepOp}));
  EXPECT_EQ(a.transfer_range, (std::vector<int>{0, 7}));
  EXPECT_EQ(a.ops.at("forward/layer0/qkv_gemm").kernels, 4);
  EXPECT_EQ(a.ops.at("backward/layer0/attention").kernels, 2);

  // The trace draws each placed record's launch arrow from its op range.
  ProfileInputs in;
  in.backend = "cuda";
  in.ranges = p.ranges;
  in.gpu = &p.gpu;
  const nlohmann::json trace = chrome_trace(in, a);
  int from_ops = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "s" && e["tid"] == 1) ++from_ops;
  }
  EXPECT_EQ(from_ops, 8);
}

TEST(LaunchOrder, ARecordOutOfOrderIsRefusedNotGuessed) {
  const Warmup w;
  std::string why;
  const auto order = learn_launch_order(w.ranges, w.gpu, &why);
  ASSERT_TRUE(order.has_value()) << why;

  Profiled renamed;  // the second step ran another kernel in the GEMM's place
  renamed.gpu.kernels[3].name = "other_gemm";
  Attribution a = attribute(renamed.ranges, &renamed.gpu, &*order);
  EXPECT_EQ(a.by_launch_order, 0);
  EXPECT_NE(a.launch_order_note.find("launch 2 of profiled step 2 is other_gemm"),
            std::string::npos)
      << a.launch_order_note;
  // Counted by start time instead, and no op is claimed.
  for (const std::string& op : a.kernel_ops) EXPECT_EQ(op, kUnattributed);

  Profiled short_run;  // a launch missing altogether
  short_run.gpu.kernels.erase(short_run.gpu.kernels.begin() + 5, short_run.gpu.kernels.end());
  a = attribute(short_run.ranges, &short_run.gpu, &*order);
  EXPECT_EQ(a.by_launch_order, 0);
  EXPECT_NE(a.launch_order_note.find("7 records for 2 steps of 4 launches"), std::string::npos)
      << a.launch_order_note;
}

}  // namespace
}  // namespace tinyllama::prof
