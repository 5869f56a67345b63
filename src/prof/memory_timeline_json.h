#pragma once
// The memory timeline as JSON (--enable-memory-profiling), and the
// activation section of train's --json report.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "prof/memory_timeline.h"

namespace tinyllama::prof {

// The driver's count of device memory in use at one point of the run
// (cudaMemGetInfo: every allocation of the process, the CUDA context's too).
struct DriverSample {
  std::string point;  // "after setup", "after step 3"
  std::int64_t used_bytes = 0;
};

// {"activations_bytes", "by_kind": {kind: bytes}, "buffers": [{name, kind,
// bytes, offset_bytes, first_op, last_op, lifetimes}], "ops": [names]}:
// the activations broken down by kind (summing to activations_bytes, the
// arena and the token ids) and each buffer's lifetime in one step's ops.
nlohmann::json activation_breakdown_json(const MemoryTimeline& tl);

// The whole timeline: the allocated memory by category, the arena, the
// peak, every buffer, every op with its live bytes (total and by kind) and
// the buffers live in it (indices into "buffers"), and the driver's samples
// (null, with driver_note saying why, where there are none).
nlohmann::json memory_timeline_json(const MemoryTimeline& tl,
                                    const std::vector<DriverSample>& samples,
                                    const std::string& driver_note);

}  // namespace tinyllama::prof
