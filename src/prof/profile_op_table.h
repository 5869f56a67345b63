#pragma once
// The profile summary's per-op tables: the cost model's ops (prof/cost_model.h)
// joined by path with the time attributed to their markers
// (prof/attribution.h), with achieved TFLOP/s and GB/s and the roofline's
// bound. profile_summary.cc puts them in summary.json.
#include <nlohmann/json.hpp>
#include <optional>

#include "prof/attribution.h"
#include "prof/device_peaks.h"
#include "prof/profile_summary.h"

namespace tinyllama::prof {

// Which clock an op's achieved rates come from.
enum class TimeSource { GpuKernels, HostRanges, None };

// Sets j["op_time_source"], j["ops"] (one row per op kind, summed over
// layers; ops the cost model lacks as "unmodelled") and j["op_instances"]
// (one row per op path). `steps` divides the attributed time into per-step
// figures; `peak_tf` is the device's dense peak at the run's precision.
void op_tables(const ProfileInputs& in, const Attribution& a, TimeSource source, double steps,
               const std::optional<DevicePeak>& peak, double peak_tf, nlohmann::json& j);

}  // namespace tinyllama::prof
