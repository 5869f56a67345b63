#pragma once
// Joins the GPU's records with the host's op ranges: which op launched each
// kernel. Eager launches are found by time: the API call with the kernel's
// correlation id ran inside exactly one innermost host range. Kernels
// replayed from a CUDA graph were launched by one cudaGraphLaunch, so they
// take the op tag their graph node got when it was captured instead. Eager
// records recorded without their API calls take their place in a launch
// order learnt from a step that had them (launch_order.h).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "prof/activity.h"
#include "prof/host_ranges.h"
#include "prof/launch_order.h"

namespace tinyllama::prof {

// Pseudo-ops for GPU work outside any op range.
inline constexpr const char* kStepOp = "(step)";                // inside a step, outside every op
inline constexpr const char* kUnattributed = "(unattributed)";  // no launch record found

// "step/forward/layer3/qkv_gemm" -> "forward/layer3/qkv_gemm"; "step" -> "".
std::string strip_step(const std::string& path);
// "forward/layer3/qkv_gemm" -> "forward/qkv_gemm": the op summed over layers.
std::string op_kind_key(const std::string& op_path);

// Over the profiled steps, per op path.
struct OpTime {
  std::int64_t host_calls = 0;  // host ranges with this path
  std::int64_t host_ns = 0;
  std::int64_t kernels = 0;  // kernels attributed to the op
  std::int64_t transfers = 0;
  std::int64_t gpu_ns = 0;  // kernel + memcpy/memset time attributed to the op
  // Of its kernels' time, the part during which kernels ran on another
  // stream of the device (prof/overlap.h).
  std::int64_t beside_ns = 0;
};

struct Attribution {
  std::vector<std::string> range_paths;  // per host range, below the step ("" for a step)
  std::vector<int> steps;                // indices of the top-level "step" ranges
  std::int64_t step_ns = 0;              // the steps' total wall time
  // Per kernel / transfer: inside a profiled step, op path, launching API call.
  std::vector<bool> kernel_in_step;
  std::vector<std::string> kernel_ops;
  std::vector<int> kernel_api;    // index into GpuActivity::api_calls, -1 if none
  std::vector<int> kernel_range;  // the host range that launched it, -1 if unknown
  std::vector<bool> kernel_by_graph_node;
  std::vector<bool> transfer_in_step;
  std::vector<std::string> transfer_ops;
  std::vector<int> transfer_api;
  std::vector<int> transfer_range;
  // Records placed by the learnt launch order, and why it placed none when
  // it was given but the profiled steps did not follow it.
  std::int64_t by_launch_order = 0;
  std::string launch_order_note;
  std::map<std::string, OpTime> ops;
  std::int64_t graph_kernels = 0;  // in-step kernels launched from a graph
};

// gpu may be null (no kernel statistics): then only host ranges are joined.
// order, when given, places the eager records that have no API call.
Attribution attribute(const std::vector<HostRange>& ranges, const GpuActivity* gpu,
                      const LaunchOrder* order = nullptr);

}  // namespace tinyllama::prof
