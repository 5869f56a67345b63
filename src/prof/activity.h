#pragma once
// What the GPU did during the profiled steps, as plain data: kernels, memory
// copies and sets, and the host API calls that launched them, all on the
// host's steady clock (host_ranges.h). The CUPTI collector fills it on a GPU;
// tests fill it by hand, so every writer is tested without a GPU.
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace tinyllama::prof {

struct KernelRecord {
  std::string name;  // as the driver reports it (mangled C++ names included)
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
  std::uint32_t correlation = 0;  // of the API call that launched it
  std::uint64_t graph_node = 0;   // non-zero when launched from a CUDA graph
  std::uint32_t graph_id = 0;
  std::array<int, 3> grid{0, 0, 0};
  std::array<int, 3> block{0, 0, 0};
  std::int64_t duration_ns() const { return end_ns - start_ns; }
};

// A memcpy or memset on the device's timeline.
struct TransferRecord {
  std::string name;  // "memcpy HtoD", "memcpy DtoH", "memcpy DtoD", "memset", ...
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t bytes = 0;
  std::uint32_t device = 0;
  std::uint32_t stream = 0;
  std::uint32_t correlation = 0;
  std::uint64_t graph_node = 0;
  std::int64_t duration_ns() const { return end_ns - start_ns; }
};

// A CUDA runtime or driver API call on the host ("cudaLaunchKernel").
struct ApiRecord {
  std::string name;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::uint32_t correlation = 0;
  std::uint32_t thread = 0;
};

struct GpuActivity {
  std::vector<KernelRecord> kernels;
  std::vector<TransferRecord> transfers;
  std::vector<ApiRecord> api_calls;
  // Graph node id -> path of the host range open when the node was captured
  // ("step/forward/layer3/qkv_gemm"), including nodes cloned into an
  // executable graph: how kernels replayed from a graph find their op.
  std::unordered_map<std::uint64_t, std::string> graph_node_ops;
  std::uint64_t dropped_records = 0;  // records CUPTI had no buffer for
};

}  // namespace tinyllama::prof
