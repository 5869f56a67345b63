// The profile's clock summary: which samples count, the medians and extremes,
// each reason's share, and the printed lines; the sampler without a GPU.
#include "prof/gpu_clocks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "model/test_plans.h"
#include "prof/attribution.h"
#include "prof/clock_sampler.h"
#include "prof/device_peaks.h"
#include "prof/profile_summary.h"
#include "profile_inputs.h"

namespace tinyllama::prof {
namespace {

ClockReport capped_run() {
  ClockReport r;
  r.max_sm_mhz = 1980;
  r.power_limit_w = 700;
  r.interval_ms = 10;
  // Two idle samples (left out: the idle bit), then five busy ones, three of
  // them at the power cap and one also thermally slowed.
  r.samples = {{1980, 90, kClockReasonIdle},
               {1530, 692, kClockReasonPowerCap},
               {1440, 697, kClockReasonPowerCap | kClockReasonSwThermal},
               {1605, 650, 0},
               {1545, 690, kClockReasonPowerCap},
               {1755, 610, 0},
               {1980, 85, kClockReasonIdle}};
  return r;
}

TEST(ClockSummary, SummarisesTheBusySamplesOnly) {
  const nlohmann::json c = clocks_summary(capped_run());
  EXPECT_EQ(c["samples"].get<int>(), 5);
  EXPECT_DOUBLE_EQ(c["sm_mhz_median"].get<double>(), 1545);
  EXPECT_DOUBLE_EQ(c["sm_mhz_min"].get<double>(), 1440);
  EXPECT_DOUBLE_EQ(c["sm_mhz_max"].get<double>(), 1755);
  EXPECT_DOUBLE_EQ(c["power_w_median"].get<double>(), 690);
  EXPECT_DOUBLE_EQ(c["power_w_max"].get<double>(), 697);
  EXPECT_DOUBLE_EQ(c["device_max_sm_mhz"].get<double>(), 1980);
  EXPECT_DOUBLE_EQ(c["power_limit_w"].get<double>(), 700);
  EXPECT_DOUBLE_EQ(c["reasons_pct"]["power cap"].get<double>(), 60);
  EXPECT_DOUBLE_EQ(c["reasons_pct"]["thermal (software)"].get<double>(), 20);
  EXPECT_DOUBLE_EQ(c["reasons_pct"]["power brake"].get<double>(), 0);
}

TEST(ClockSummary, MedianOfAnEvenCountAveragesTheMiddleTwo) {
  ClockReport r;
  r.samples = {{1400, 600, 0}, {1600, 650, 0}, {1500, 700, 0}, {1700, 640, 0}};
  const nlohmann::json c = clocks_summary(r);
  EXPECT_DOUBLE_EQ(c["sm_mhz_median"].get<double>(), 1550);
  EXPECT_DOUBLE_EQ(c["power_w_median"].get<double>(), 645);
  EXPECT_TRUE(c["device_max_sm_mhz"].is_null()) << "unknown stays unknown, not 0";
  EXPECT_TRUE(c["power_limit_w"].is_null());
}

TEST(ClockSummary, PrintsTheClockAgainstTheMaximumAndWhatHeldItDown) {
  const std::string text = format_clocks(clocks_summary(capped_run()), "  clocks    ");
  EXPECT_NE(text.find("SM 1545 MHz median (1440-1755) of the GPU's 1980 MHz (78 %)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("power 690 W median of its 700 W limit; 5 samples while busy"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("power cap in 60 %"), std::string::npos) << text;
  EXPECT_NE(text.find("thermal (software) in 20 %"), std::string::npos) << text;
  EXPECT_EQ(text.find("power brake"), std::string::npos) << "reasons never seen are left out";
}

TEST(ClockSummary, NoBusySampleGivesTheReason) {
  ClockReport r;
  r.note = "the driver's NVML library (libnvidia-ml.so.1) is not there";
  EXPECT_EQ(
      format_clocks(clocks_summary(r), "  clocks    "),
      "  clocks    not sampled: the driver's NVML library (libnvidia-ml.so.1) is not there\n");
  ClockReport idle;
  idle.samples = {{1980, 80, kClockReasonIdle}};
  EXPECT_EQ(clocks_summary(idle)["note"].get<std::string>(), "no sample while the GPU was busy");
}

TEST(ClockSummary, NothingHeldDownSaysSo) {
  ClockReport r;
  r.samples = {{1980, 500, 0}};
  EXPECT_NE(format_clocks(clocks_summary(r), "  clocks    ").find("nothing held the clock down"),
            std::string::npos);
}

// The training summary's label is wider: the lines under the first keep its
// indent.
TEST(ClockSummary, LaterLinesIndentedAsFarAsTheLabel) {
  const std::string text = format_clocks(clocks_summary(capped_run()), "  clocks       ");
  EXPECT_EQ(text.rfind("  clocks       SM 1545 MHz", 0), 0u) << text;
  EXPECT_NE(text.find("\n               clock held down by: "), std::string::npos) << text;
}

// The summary puts the MFU against the peak at the clock the GPU held too:
// the datasheet's peak x held / the clock the datasheet assumes.
TEST(ClockSummary, MfuAtTheHeldClock) {
  ProfileInputs in = tiny_h100_inputs(Precision::amp(DType::BF16));
  const ClockReport clocks = capped_run();
  in.clocks = &clocks;
  const nlohmann::json j = profile_summary(in, attribute(in.ranges, nullptr), {});
  ASSERT_TRUE(j.contains("clocks"));
  const nlohmann::json& h = j["mfu"]["at_held_clock"];
  EXPECT_DOUBLE_EQ(h["sm_mhz"].get<double>(), 1545);
  EXPECT_DOUBLE_EQ(h["rated_sm_mhz"].get<double>(), 1830);
  EXPECT_DOUBLE_EQ(h["peak_tflops"].get<double>(), 989.0 * 1545 / 1830);
  EXPECT_DOUBLE_EQ(h["value"].get<double>(), j["mfu"]["value"].get<double>() * 1830 / 1545);
  const std::string text = format_profile_summary(j);
  EXPECT_NE(text.find("at the median 1545 MHz the peak is 835 TFLOP/s (989 at the datasheet's "
                      "1830 MHz): MFU "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  clocks    SM 1545 MHz median"), std::string::npos) << text;

  // fp32 runs are held against the CUDA cores' clock; without samples, or on
  // a GPU whose clock the table does not know, there is no such figure.
  in.plan = graph_plan(level_preset("v2"), Precision::fp32(), in.model, in.shape);
  EXPECT_DOUBLE_EQ(
      profile_summary(in, attribute(in.ranges, nullptr), {})["mfu"]["at_held_clock"]["rated_sm_mhz"]
          .get<double>(),
      1980);
  ClockReport none;
  none.note = "no NVML";
  in.clocks = &none;
  EXPECT_FALSE(
      profile_summary(in, attribute(in.ranges, nullptr), {})["mfu"].contains("at_held_clock"));
  in.clocks = &clocks;
  in.device = "NVIDIA H100 NVL";
  EXPECT_FALSE(
      profile_summary(in, attribute(in.ranges, nullptr), {})["mfu"].contains("at_held_clock"));
  in.clocks = nullptr;
  EXPECT_FALSE(profile_summary(in, attribute(in.ranges, nullptr), {}).contains("clocks"))
      << "no sampler (the CPU backend): no entry";
}

// The clocks behind each datasheet figure multiply back to it.
TEST(ClockSummary, DatasheetClocksGiveTheDatasheetPeaks) {
  const DevicePeak h100 = *find_device_peak("NVIDIA H100 80GB HBM3");
  EXPECT_NEAR(528 * 1024 * peak_clock_mhz(h100, Precision::amp(DType::BF16)) * 1e6 / 1e12,
              peak_tflops(h100, Precision::amp(DType::BF16)), 0.5);
  EXPECT_NEAR(16896 * 2 * peak_clock_mhz(h100, Precision::fp32()) * 1e6 / 1e12,
              peak_tflops(h100, Precision::fp32()), 0.1);
  const DevicePeak pcie = *find_device_peak("NVIDIA H100 PCIe");
  EXPECT_NEAR(456 * 1024 * peak_clock_mhz(pcie, Precision::amp(DType::F16)) * 1e6 / 1e12, 756.0,
              0.5);
  const DevicePeak a100 = *find_device_peak("NVIDIA A100-SXM4-80GB");
  EXPECT_NEAR(432 * 512 * peak_clock_mhz(a100, Precision::amp(DType::BF16)) * 1e6 / 1e12, 312.0,
              0.5);
  EXPECT_DOUBLE_EQ(peak_clock_mhz(h100, Precision::fp64()), 0.0);
  EXPECT_DOUBLE_EQ(peak_clock_mhz(*find_device_peak("NVIDIA H100 NVL"), Precision::fp32()), 0.0);
}

// Without a GPU the sampler starts nothing and says why; stop() is safe.
TEST(ClockSampler, WithoutADeviceReportsWhyAndNoSamples) {
  const std::unique_ptr<ClockSampler> none = ClockSampler::for_gpu("", 10);
  EXPECT_EQ(none->note(), "no CUDA device");
  none->start();
  const ClockReport r = none->stop();
  EXPECT_TRUE(r.samples.empty());
  EXPECT_EQ(r.note, "no CUDA device");
  const std::unique_ptr<ClockSampler> unknown = ClockSampler::for_gpu("0000:ff:1f.7", 10);
  EXPECT_FALSE(unknown->note().empty()) << "no NVML here, or no such GPU";
  unknown->start();
  EXPECT_TRUE(unknown->stop().samples.empty());
}

// The thread takes a sample every interval until stop(), skips the readings
// that fail, and keeps the header; stop() twice and a sampler never started
// are safe.
TEST(ClockSampler, SamplesASourceUntilStopped) {
  std::atomic<int> calls{0};
  ClockReport header;
  header.max_sm_mhz = 1980;
  header.power_limit_w = 700;
  ClockSampler sampler(
      [&calls](ClockSample* s) {
        const int n = calls.fetch_add(1);
        if (n % 3 == 2) return false;  // every third reading fails
        s->sm_mhz = 1500 + n;
        s->power_w = 600;
        s->reasons = kClockReasonPowerCap;
        return true;
      },
      header, 2.0);
  EXPECT_TRUE(sampler.note().empty());
  sampler.start();
  sampler.start();  // already running: no second thread
  while (calls.load() < 9) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const ClockReport r = sampler.stop();
  const int taken = calls.load();
  EXPECT_GE(taken, 9);
  EXPECT_EQ(static_cast<int>(r.samples.size()), taken - taken / 3) << "failed readings skipped";
  EXPECT_DOUBLE_EQ(r.samples[0].sm_mhz, 1500);
  EXPECT_DOUBLE_EQ(r.samples[2].sm_mhz, 1503) << "the third reading (n = 2) failed";
  EXPECT_DOUBLE_EQ(r.max_sm_mhz, 1980);
  EXPECT_DOUBLE_EQ(r.power_limit_w, 700);
  EXPECT_DOUBLE_EQ(r.interval_ms, 2.0);
  EXPECT_EQ(sampler.stop().samples.size(), r.samples.size()) << "nothing after stop";
  ClockSampler idle([](ClockSample*) { return true; }, ClockReport{}, 2.0);
  EXPECT_TRUE(idle.stop().samples.empty());
}

}  // namespace
}  // namespace tinyllama::prof
