#include "device/cuda_launch.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <tuple>
#include <vector>

#include "device/cuda_check.h"
#include "device/cuda_launch.cuh"

namespace tinyllama::cuda {
namespace {

// A handful of streams at most (three per backend): a vector beats a hash
// set, and the lock is shared on the launch path (one eager launch each).
struct ProgrammaticStreams {
  std::shared_mutex mutex;
  std::vector<cudaStream_t> on;
};

ProgrammaticStreams& registry() {
  static ProgrammaticStreams streams;
  return streams;
}

// Compiled like every kernel of the library: the architecture its binary
// was built for is theirs.
__global__ void programmatic_probe_kernel() {
  pdl_wait_previous();
  pdl_allow_next();
}

}  // namespace

void set_programmatic_launch(cudaStream_t stream, bool on) {
  ProgrammaticStreams& r = registry();
  std::unique_lock lock(r.mutex);
  const auto found = std::find(r.on.begin(), r.on.end(), stream);
  if (on && found == r.on.end()) r.on.push_back(stream);
  if (!on && found != r.on.end()) r.on.erase(found);
}

bool programmatic_launch(cudaStream_t stream) {
  ProgrammaticStreams& r = registry();
  std::shared_lock lock(r.mutex);
  return std::find(r.on.begin(), r.on.end(), stream) != r.on.end();
}

std::string programmatic_launch_unsupported() {
  int device = 0;
  cudaDeviceProp prop{};
  cudaFuncAttributes attributes{};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaGetDeviceProperties(&prop, device) != cudaSuccess ||
      cudaFuncGetAttributes(&attributes, programmatic_probe_kernel) != cudaSuccess) {
    cudaGetLastError();  // leave no error behind
    return "the CUDA device could not be queried";
  }
  const std::string device_sm = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
  if (prop.major < 9) {
    return "programmatic dependent launch needs sm_90 or newer (this device: " + device_sm + ")";
  }
  // ptxVersion: the virtual architecture the kernels were compiled for (a
  // JIT from older PTX would run them without their waits).
  if (attributes.ptxVersion < 90) {
    return "this build's kernels are compiled for sm_" + std::to_string(attributes.ptxVersion) +
           ", without the device-side waits programmatic launches need";
  }
  return "";
}

int current_device_sm_count() {
  static std::once_flag once;
  static std::vector<int> sms;
  std::call_once(once, [] {
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    for (int dev = 0; dev < count; ++dev) {
      int n = 0;
      CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
      sms.push_back(n);
    }
  });
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  return sms.at(static_cast<std::size_t>(dev));
}

int resident_blocks_per_sm(const void* kernel, int block_threads, std::size_t smem) {
  static std::mutex mutex;
  static std::map<std::tuple<const void*, int, std::size_t>, int> per_sm_of;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(kernel, block_threads, smem);
  auto it = per_sm_of.find(key);
  if (it == per_sm_of.end()) {
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block_threads, smem));
    it = per_sm_of.emplace(key, std::max(1, per_sm)).first;
  }
  return it->second;
}

}  // namespace tinyllama::cuda
