// The engine's CUDA entry points (cuda/cuda_entry.h) in a build with the
// toolkit. Queries never throw when there is no device or no driver: the CLI
// asks them to decide what to offer and to describe the build.
#include <cuda_runtime.h>

#include <cstdlib>
#include <iterator>
#include <memory>
#include <string>

#include "core/errors.h"
#include "cuda/cuda_backend.h"
#include "cuda/cuda_decoder.h"
#include "cuda/cuda_entry.h"
#include "cuda/cuda_workspaces.h"
#include "device/cuda_check.h"
#include "device/cuda_env.h"
#include "device/cuda_launch.h"
#include "ops/attention/cuda_attention_choice.h"
#include "ops/attention/flash/flash_attention.h"
#include "ops/linear/cuda_gemm.h"
#include "ops/linear/cuda_gemm_fp8.h"
#include "ops/swiglu/swiglu_gemm/swiglu_gemm.h"

#if __has_include(<cudnn.h>)
#include <cudnn.h>
#define TINYLLAMA_HAS_CUDNN_HEADER 1
#endif

namespace tinyllama {
namespace {

// CUDA encodes versions as 1000*major + 10*minor.
std::string version_string(int v) {
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(Precision precision) {
  return std::make_unique<cuda::CudaBackend>(precision);
}

std::unique_ptr<TokenDecoder> make_cuda_decoder(const ModelConfig& cfg,
                                                const std::vector<double>& params,
                                                int max_positions,
                                                const CudaDecodeOptions& options) {
  if (!cuda_device_available()) {
    throw RuntimeFailure("--device cuda: no CUDA device found (" + cuda_device_description() + ")");
  }
  return std::make_unique<cuda::CudaDecoder>(cfg, params, max_positions, options);
}

namespace {

std::string fp8_gemm_unsupported() {
  if (!cuda_device_available()) return "no CUDA device";
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  return cuda::fp8_gemm_supported(device) ? ""
                                          : "FP8 tensor cores need compute capability 8.9 or newer";
}

}  // namespace

DeviceCaps cuda_device_caps() {
  DeviceCaps caps;
  caps.kind = DeviceKind::Cuda;
  caps.graphs = true;
  caps.parallel_branches = true;
  caps.flash_head_dims.assign(std::begin(cuda::kFlashHeadDims), std::end(cuda::kFlashHeadDims));
  caps.no_programmatic_launch = cuda::programmatic_launch_unsupported();
  caps.no_hopper_kernels = cuda::hopper_kernels_missing();
  caps.no_fp8_gemm = fp8_gemm_unsupported();
  caps.sm_count = cuda_device_available() ? cuda::current_device_sm_count() : 0;
  caps.flash_one_launch = cuda::env_flag(std::getenv("TINYLLAMA_FLASH_ONE_LAUNCH"), true);
  caps.loss_staged_rows = cuda::env_flag(std::getenv("TINYLLAMA_CE_STAGED_ROWS"), true);
  caps.times_attention = cuda_device_available();
  return caps;
}

std::optional<std::string> cuda_cudnn_attention(const ModelConfig& cfg, BatchShape shape,
                                                Precision precision) {
  // A build without cuDNN answers too, with that reason (cudnn/no_cudnn.cc).
  return cuda::cudnn_attention_support(cfg, shape, precision);
}

AttentionTiming cuda_time_attention(AttentionImpl impl, const ModelConfig& cfg, BatchShape shape,
                                    Precision precision, const KernelChoices& kernels) {
  return cuda::time_attention(impl, cfg, shape, precision, kernels);
}

std::vector<Workspace> cuda_workspaces(const ModelConfig& cfg, BatchShape shape,
                                       const StepPlan& plan) {
  return cuda::workspace_sizes(cfg, shape, plan, cuda::gemm_autotune_enabled()).list();
}

bool cuda_device_available() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // leave no error behind for the next check
    return false;
  }
  return count > 0;
}

std::string cuda_device_description() {
  if (!cuda_device_available()) return "none (no CUDA device found)";
  try {
    return cuda::describe_device(0);
  } catch (const RuntimeFailure&) {
    cudaGetLastError();
    return "unknown CUDA device";
  }
}

bool cuda_memory_info(std::size_t* free_bytes, std::size_t* total_bytes) {
  if (!cuda_device_available()) return false;
  std::size_t f = 0;
  std::size_t t = 0;
  if (cudaMemGetInfo(&f, &t) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  if (free_bytes != nullptr) *free_bytes = f;
  if (total_bytes != nullptr) *total_bytes = t;
  return true;
}

bool cuda_pci_bus_id(std::string* id) {
  if (!cuda_device_available()) return false;
  int device = 0;
  char bus[32] = {};
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetPCIBusId(bus, static_cast<int>(sizeof(bus)), device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  *id = bus;
  return true;
}

std::string cuda_build_versions() {
  int runtime = 0;
  int driver = 0;
  const std::string rt = cudaRuntimeGetVersion(&runtime) == cudaSuccess ? version_string(runtime)
                                                                        : std::string("unknown");
  const std::string dr = cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0
                             ? version_string(driver)
                             : std::string("none");
  cudaGetLastError();
  std::string s =
      "CUDA " + version_string(CUDART_VERSION) + " (runtime " + rt + ", driver " + dr + "), ";
#ifdef TINYLLAMA_HAS_CUDNN_HEADER
  s += "cuDNN " + std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR);
#else
  s += "cuDNN not found";
#endif
  return s;
}

}  // namespace tinyllama
