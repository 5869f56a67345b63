// summary.json's counter section, its printed lines and the roofline SVG,
// from recorded counter values and a hand-made cost model (no GPU needed):
// per-op sums against the model, the > 20 % DRAM naming, points drawn where
// the placement puts them, and the one line when counters are unavailable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "prof/counter_summary.h"
#include "prof/counters.h"
#include "prof/recorded_counters.h"
#include "prof/roofline_svg.h"

namespace tinyllama::prof {
namespace {

using nlohmann::json;

// recorded_copy with SM activity and one fp32 add per float as its work.
MetricValues copy_with_fadd() {
  MetricValues v = recorded_copy();
  set(v, Metric::SmActive, 99.1);
  set(v, Metric::Fadd, 268435456);
  return v;
}

OpCost op(const std::string& path, const std::string& phase, int layer, const std::string& name,
          double flops, double reads, double writes) {
  OpCost c;
  c.path = path;
  c.phase = phase;
  c.layer = layer;
  c.op = name;
  c.flops = static_cast<std::int64_t>(flops);
  c.bytes = static_cast<std::int64_t>(reads + writes);
  c.write_bytes = static_cast<std::int64_t>(writes);
  return c;
}

struct Fixture {
  std::vector<KernelStat> stats = {{"rmsnorm_kernel", 4, 4 * 540000, 530000, 550000, 66.7},
                                   {"adamw_kernel", 2, 2 * 540000, 535000, 545000, 33.3}};
  Attribution attribution;
  StepCost cost;
  CounterInputs in;
  Roofs roofs;

  Fixture() {
    // Two profiled steps; per step each op ran 540 us.
    attribution.ops["forward/layer0/rmsnorm"].gpu_ns = 2 * 540000;
    attribution.ops["forward/layer1/rmsnorm"].gpu_ns = 2 * 540000;
    attribution.ops["optimizer/adamw"].gpu_ns = 2 * 540000;
    // The model's minimal bytes: rmsnorm 0.85 GB read and 0.85 written per
    // layer (measured 1.07 read: 26 % over, named), AdamW 1.0 + 1.0 GB
    // (measured 1.07 read: 7 % over, not named).
    cost.ops = {op("forward/layer0/rmsnorm", "forward", 0, "rmsnorm", 5e8, 0.85e9, 0.85e9),
                op("forward/layer1/rmsnorm", "forward", 1, "rmsnorm", 5e8, 0.85e9, 0.85e9),
                op("optimizer/adamw", "optimizer", -1, "adamw", 2.7e9, 1.0e9, 1.0e9)};
    in.launches = {{"rmsnorm_kernel", "forward/layer0/rmsnorm", copy_with_fadd()},
                   {"rmsnorm_kernel", "forward/layer1/rmsnorm", copy_with_fadd()},
                   {"adamw_kernel", "optimizer/adamw", copy_with_fadd()}};
    in.ranges = 3;
    in.passes = 5;
    in.counter_step_ms = 812.5;
    roofs.compute_tflops = 989;
    roofs.fp32_tflops = 67;
    roofs.bandwidth_gbps = 4800;
  }

  json section() const { return counter_section(in, {&stats, &attribution, &cost, 2, roofs}); }
};

const json& op_entry(const json& section, const std::string& name) {
  for (const json& o : section["ops"]) {
    if (o["op"] == name) return o;
  }
  static const json none;
  return none;
}

TEST(CounterSection, OpsSumOverLayersBesideTheCostModel) {
  const json s = Fixture().section();
  ASSERT_TRUE(s["available"].get<bool>());
  EXPECT_EQ(s["passes"], 5);
  const json& norm = op_entry(s, "forward/rmsnorm");
  ASSERT_TRUE(norm.is_object()) << s.dump(1);
  EXPECT_EQ(norm["counters"]["launches"], 2);
  EXPECT_DOUBLE_EQ(norm["counters"]["dram_bytes"].get<double>(), 2 * (1073790720.0 + 1075718400.0));
  EXPECT_DOUBLE_EQ(norm["model_bytes"].get<double>(), 3.4e9);
  EXPECT_DOUBLE_EQ(norm["model_read_bytes"].get<double>(), 1.7e9);
  EXPECT_NEAR(norm["reads_over_model"].get<double>(), 2 * 1073790720.0 / 1.7e9, 1e-12);
  EXPECT_NEAR(norm["writes_over_model"].get<double>(), 2 * 1075718400.0 / 1.7e9, 1e-12);
  // Two layers at 540 us each per step.
  EXPECT_NEAR(norm["ms_per_step"].get<double>(), 1.08, 1e-12);
  // Measured: 2 x 268 M adds over 4.3 GB; model: 1 GFLOP over 3.4 GB.
  EXPECT_NEAR(norm["measured"]["intensity"].get<double>(), 2 * 268435456.0 / 4299018240.0, 1e-12);
  EXPECT_NEAR(norm["model"]["intensity"].get<double>(), 1e9 / 3.4e9, 1e-12);
  EXPECT_EQ(norm["measured"]["bound"], "memory");
  // Layer by layer, what the kind's row sums.
  ASSERT_TRUE(s["op_paths"].contains("forward/layer1/rmsnorm")) << s["op_paths"].dump();
  EXPECT_EQ(s["op_paths"]["forward/layer1/rmsnorm"]["launches"], 1);
  EXPECT_DOUBLE_EQ(s["op_paths"]["forward/layer0/rmsnorm"]["dram_bytes"].get<double>() +
                       s["op_paths"]["forward/layer1/rmsnorm"]["dram_bytes"].get<double>(),
                   norm["counters"]["dram_bytes"].get<double>());
}

TEST(CounterSection, NamesOnlyOpsWhoseDramBytesMissTheModelByMoreThan20Percent) {
  const json s = Fixture().section();
  ASSERT_EQ(s["dram_bytes_differ"].size(), 1u) << s["dram_bytes_differ"].dump();
  EXPECT_EQ(s["dram_bytes_differ"][0]["op"], "forward/rmsnorm");
  const std::string text = format_counter_summary(s);
  EXPECT_NE(text.find("by more than 20 %: forward/rmsnorm (1.26x)"), std::string::npos) << text;
  EXPECT_EQ(text.find("optimizer/adamw (1."), std::string::npos) << text;
}

// With a DRAM pass, the step read less (its inputs partly in L2); the
// model is still held to the replayed reads, where every input came from
// DRAM: the same ratio, the same op named.
TEST(CounterSection, TheModelIsHeldToTheReplayedReads) {
  Fixture f;
  for (LaunchCounters& l : f.in.launches) {
    set(l.values, Metric::DramReadReplayed, l.values[static_cast<std::size_t>(Metric::DramRead)]);
    set(l.values, Metric::DramRead, 1e8);
  }
  const json s = f.section();
  const json& norm = op_entry(s, "forward/rmsnorm");
  EXPECT_DOUBLE_EQ(norm["counters"]["dram_bytes"].get<double>(), 2 * (1e8 + 1075718400.0));
  EXPECT_DOUBLE_EQ(norm["dram_read_replayed_bytes"].get<double>(), 2 * 1073790720.0);
  EXPECT_NEAR(norm["reads_over_model"].get<double>(), 2 * 1073790720.0 / 1.7e9, 1e-12);
  ASSERT_EQ(s["dram_bytes_differ"].size(), 1u) << s["dram_bytes_differ"].dump();
  EXPECT_EQ(s["dram_bytes_differ"][0]["op"], "forward/rmsnorm");
}

// Writes are judged over the step: an op whose writes miss the model is
// not named (L2 may hold them past its end), and the step's sum is given.
TEST(CounterSection, WritesAreJudgedOverTheStepNotPerOp) {
  Fixture f;
  f.cost.ops[2].write_bytes = static_cast<std::int64_t>(0.5e9);  // AdamW's writes 2.15x the model
  f.cost.ops[2].bytes = static_cast<std::int64_t>(1.5e9);
  const json s = f.section();
  ASSERT_EQ(s["dram_bytes_differ"].size(), 1u) << s["dram_bytes_differ"].dump();
  EXPECT_EQ(s["dram_bytes_differ"][0]["op"], "forward/rmsnorm");
  EXPECT_NEAR(op_entry(s, "optimizer/adamw")["writes_over_model"].get<double>(),
              1075718400.0 / 0.5e9, 1e-12);
  const json& w = s["step_writes"];
  EXPECT_DOUBLE_EQ(w["dram_write_bytes"].get<double>(), 3 * 1075718400.0);
  EXPECT_DOUBLE_EQ(w["model_write_bytes"].get<double>(), 2 * 0.85e9 + 0.5e9);
  EXPECT_NE(format_counter_summary(s).find("writes over the step"), std::string::npos);
}

TEST(CounterSection, TopKernelsCarryTheirCountersAndPlacement) {
  const json s = Fixture().section();
  ASSERT_EQ(s["top_kernels"].size(), 2u);
  const json& k = s["top_kernels"][0];
  EXPECT_EQ(k["name"], "rmsnorm_kernel");
  EXPECT_EQ(k["rank"], 1);
  // 4.3 GB per step in 1.08 ms of profiled time.
  EXPECT_NEAR(k["dram_gbps"].get<double>(), 4299018240.0 / 1.08e-3 / 1e9, 1e-6);
  EXPECT_DOUBLE_EQ(k["counters"]["l2_hit_pct"].get<double>(), 51.34);
  const std::string text = format_counter_summary(s);
  EXPECT_NE(text.find("5 replay passes per kernel"), std::string::npos) << text;
  EXPECT_NE(text.find("counter step 812.5 ms"), std::string::npos) << text;
  EXPECT_NE(text.find("rmsnorm_kernel"), std::string::npos) << text;
}

TEST(CounterSection, SaysWhatTheReplayAddedAndThatItIsOut) {
  Fixture f;
  EXPECT_NE(format_counter_summary(f.section()).find("could not be measured"), std::string::npos);
  set(f.in.replay_baseline, Metric::DramRead, 0.25e6);
  set(f.in.replay_baseline, Metric::DramWrite, 21.5e6);
  f.in.baseline_launches = 3;
  const json s = f.section();
  EXPECT_EQ(s["replay_baseline"]["launches"], 3);
  EXPECT_DOUBLE_EQ(s["replay_baseline"]["dram_write_bytes"].get<double>(), 21.5e6);
  const std::string text = format_counter_summary(s);
  EXPECT_NE(text.find("net of the replay's own traffic (an empty kernel read 0.25 MB + 21.5 MB "
                      "written a launch)"),
            std::string::npos)
      << text;
}

TEST(CounterSection, SaysWhereTheDramBytesCameFrom) {
  Fixture f;
  f.in.dram_note = "no step followed the counter step for the DRAM pass";
  std::string text = format_counter_summary(f.section());
  EXPECT_NE(text.find("DRAM bytes and times from the replayed passes: no step followed"),
            std::string::npos)
      << text;
  f.in.dram_note.clear();
  f.in.dram_passes = 1;
  const json s = f.section();
  EXPECT_EQ(s["dram_passes"], 1);
  text = format_counter_summary(s);
  EXPECT_NE(text.find("DRAM bytes and times from a step of their own (1 pass, not replayed)"),
            std::string::npos)
      << text;
}

TEST(CounterSection, UnavailableIsOneLine) {
  Fixture f;
  f.in.unavailable = no_counter_access_line("cuptiProfilerGetCounterAvailability",
                                            "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES");
  const json s = f.section();
  EXPECT_FALSE(s["available"].get<bool>());
  const std::string text = format_counter_summary(s);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  EXPECT_NE(text.find("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"), std::string::npos);
  EXPECT_TRUE(roofline_chart(s, "t").measured_ops.empty());
}

// Every element opened is closed, in order: the SVG is well-formed XML as
// far as its elements go (attribute values are escaped by svg_escape).
bool balanced(const std::string& svg, std::string* why) {
  std::vector<std::string> open;
  for (std::size_t at = svg.find('<'); at != std::string::npos; at = svg.find('<', at + 1)) {
    const std::size_t end = svg.find('>', at);
    if (end == std::string::npos) return *why = "unclosed tag", false;
    const std::string tag = svg.substr(at + 1, end - at - 1);
    if (tag.back() == '/') continue;
    if (tag.front() == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return *why = "stray " + tag, false;
      open.pop_back();
    } else {
      open.push_back(tag.substr(0, tag.find(' ')));
    }
  }
  if (!open.empty()) *why = "left open: " + open.back();
  return open.empty();
}

std::string attribute_of(const std::string& svg, const std::string& element_start,
                         const std::string& attribute) {
  const std::size_t at = svg.find(element_start);
  if (at == std::string::npos) return "";
  const std::size_t a = svg.find(attribute + "=\"", at);
  const std::size_t from = a + attribute.size() + 2;
  return svg.substr(from, svg.find('"', from) - from);
}

TEST(RooflineSvg, WellFormedWithEveryPointWherePlaced) {
  const json s = Fixture().section();
  const RooflineChart chart = roofline_chart(s, "H200 <bf16>");
  const std::string svg = roofline_svg(chart);
  std::string why;
  EXPECT_TRUE(balanced(svg, &why)) << why;
  EXPECT_NE(svg.find("H200 &lt;bf16&gt;"), std::string::npos);
  // Two ops, each measured and modelled, and two kernels.
  EXPECT_EQ(chart.measured_ops.size(), 2u);
  const RooflineAxes axes = roofline_axes(chart);
  const json& norm = op_entry(s, "forward/rmsnorm");
  const std::string start = "<circle data-kind=\"measured-op\" data-name=\"forward/rmsnorm\"";
  char expected[32];
  std::snprintf(expected, sizeof expected, "%.1f",
                axes.px(norm["measured"]["intensity"].get<double>()));
  EXPECT_EQ(attribute_of(svg, start, "cx"), expected);
  std::snprintf(expected, sizeof expected, "%.1f",
                axes.py(norm["measured"]["achieved_tflops"].get<double>()));
  EXPECT_EQ(attribute_of(svg, start, "cy"), expected);
  EXPECT_NE(svg.find("data-kind=\"model-op\" data-name=\"forward/rmsnorm\""), std::string::npos);
  EXPECT_NE(svg.find("data-kind=\"kernel\" data-name=\"#1 rmsnorm_kernel\""), std::string::npos);
  // The axes hold the ridge (206 FLOPs/byte) and the compute roof.
  EXPECT_GE(axes.x_max, 989e12 / 4800e9);
  EXPECT_GE(axes.y_max, 989.0);
  // A lower intensity is further left, a higher rate further up.
  EXPECT_LT(axes.px(0.1), axes.px(10));
  EXPECT_GT(axes.py(0.1), axes.py(10));
}

// Ops clustered where the GEMMs sit: each label is beside its point where it
// overlaps no other label, or left out and counted; none print over another.
TEST(RooflineSvg, LabelsOfClusteredOpsDoNotOverlap) {
  RooflineChart chart;
  chart.roofs.compute_tflops = 989;
  chart.roofs.bandwidth_gbps = 4800;
  for (int i = 0; i < 12; ++i) {
    RooflinePoint p;
    p.name = "backward/layer_gemm_" + std::to_string(i);
    p.intensity = 300 + 3 * i;  // within a few pixels of each other
    p.achieved_tflops = 600 + 5 * i;
    p.placed = true;
    chart.measured_ops.push_back(p);
  }
  RooflinePoint alone;
  alone.name = "forward/rmsnorm";
  alone.intensity = 0.5;
  alone.achieved_tflops = 2;
  alone.placed = true;
  chart.measured_ops.push_back(alone);
  const std::string svg = roofline_svg(chart);
  struct Box {
    double x0, y0, x1, y1;
  };
  std::vector<Box> boxes;
  int labels = 0;
  for (std::size_t at = svg.find("<text x=\""); at != std::string::npos;
       at = svg.find("<text x=\"", at + 1)) {
    const std::size_t close = svg.find("</text>", at);
    const std::string element = svg.substr(at, close - at);
    if (element.find("font-size=\"9\"") == std::string::npos) continue;  // op labels only
    ++labels;
    const double x = std::stod(element.substr(9));
    const double y = std::stod(element.substr(element.find("y=\"") + 3));
    const std::string name = element.substr(element.find('>') + 1);
    const double w = 5.0 * static_cast<double>(name.size());
    const double x0 = element.find("text-anchor=\"end\"") != std::string::npos ? x - w : x;
    for (const Box& b : boxes) {
      EXPECT_FALSE(x0 < b.x1 && b.x0 < x0 + w && y - 9 < b.y1 && b.y0 < y + 2) << name;
    }
    boxes.push_back({x0, y - 9, x0 + w, y + 2});
  }
  EXPECT_NE(svg.find(">forward/rmsnorm</text>"), std::string::npos);  // alone: labelled
  EXPECT_LT(labels, 13);  // the cluster cannot hold all twelve
  EXPECT_GE(labels, 3);
  const std::string note = std::to_string(13 - labels) + " op labels left out";
  EXPECT_NE(svg.find(note), std::string::npos) << note;
  std::string why;
  EXPECT_TRUE(balanced(svg, &why)) << why;
}

}  // namespace
}  // namespace tinyllama::prof
