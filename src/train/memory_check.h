#pragma once
// Refuses a run that cannot fit before it allocates anything: the exact
// planned bytes (Model::estimate_memory: the model's blocks, the activation
// arena and the plan's backend workspaces -- the total the summary reports
// as the peak) against what the device has.
// Failing here gives one clear line instead of an out-of-memory deep inside
// setup, or the host swapping itself to a halt.
#include <cstdint>
#include <istream>
#include <string>

#include "model/model.h"
#include "model/step_plan.h"

namespace tinyllama {

// "1.5 GB", "490.0 MB", "12.0 KB" (decimal units, like peak_mb).
std::string format_bytes(std::int64_t bytes);

// MemAvailable of a /proc/meminfo stream in bytes, or -1 when absent.
std::int64_t parse_meminfo_available(std::istream& meminfo);

// Bytes the device can still give: free device memory on CUDA, MemAvailable
// on the CPU; -1 when unknown (the check is then skipped).
std::int64_t available_memory_bytes(DeviceKind device);

// Throws RuntimeFailure "run needs X GB (parameters A, ...) but the cuda
// device has Y GB free" when need exceeds available (unless available < 0).
void check_memory_fits(const MemoryBreakdown& need, std::int64_t available, DeviceKind device);

// The two above for a resolved plan.
void check_memory(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan);

}  // namespace tinyllama
