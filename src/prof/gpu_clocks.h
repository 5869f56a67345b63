#pragma once
// The GPU's SM clock and power while the profiled steps run, and why the
// clock sat below its maximum (NVML's clock event reasons). A GPU at its
// power limit runs its SMs slower than the clock its peak FLOP/s assume, so
// the same kernels take longer: the profile says so next to the MFU.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace tinyllama::prof {

// NVML's clock event reason bits (nvmlClocksEventReason*), the ones reported.
inline constexpr std::uint64_t kClockReasonIdle = 0x1;
inline constexpr std::uint64_t kClockReasonPowerCap = 0x4;
inline constexpr std::uint64_t kClockReasonHwSlowdown = 0x8;
inline constexpr std::uint64_t kClockReasonSwThermal = 0x20;
inline constexpr std::uint64_t kClockReasonHwThermal = 0x40;
inline constexpr std::uint64_t kClockReasonPowerBrake = 0x80;

struct ClockSample {
  double sm_mhz = 0;
  double power_w = 0;
  std::uint64_t reasons = 0;  // the bits above
};

struct ClockReport {
  std::vector<ClockSample> samples;
  double max_sm_mhz = 0;     // the GPU's maximum SM clock; 0 when unknown
  double power_limit_w = 0;  // the enforced power limit; 0 when unknown
  double interval_ms = 0;    // between samples
  std::string note;          // why there are no samples (no NVML, CPU run, ...)
};

// summary.json's "clocks": the samples taken while the GPU was busy (NVML's
// idle bit clear) summarised: count, SM clock median/min/max, power median/
// max, the maximum clock and power limit, and the share of samples with each
// reason that holds the clock down. Or {"note": ...} without samples.
nlohmann::json clocks_summary(const ClockReport& report);

}  // namespace tinyllama::prof
