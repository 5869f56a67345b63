#pragma once
// The CUDA backend's entry points. Defined in src/cuda/ when the toolkit is
// present, and by no_cuda_stub.cc (the only file of this folder such a
// build compiles) otherwise, so the rest of the
// engine never needs #ifdefs.
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/backend.h"
#include "model/token_decoder.h"

namespace tinyllama {

std::unique_ptr<Backend> make_cuda_backend(Precision precision);
bool cuda_device_available();
std::string cuda_device_description();
bool cuda_memory_info(std::size_t* free_bytes, std::size_t* total_bytes);
// The current device's PCI bus id ("0000:17:00.0"), which names the same GPU
// to NVML whatever CUDA_VISIBLE_DEVICES renumbered; false without a device.
bool cuda_pci_bus_id(std::string* id);
std::string cuda_build_versions();
// What the CUDA backend and the current device can do (graphs, parallel
// branches, the flash kernels' head_dims, the Hopper kernels, the SM count),
// as facts for resolve_plan. A build without CUDA says: nothing (eager, no
// kernels).
DeviceCaps cuda_device_caps();
// The facts a run's plan needs measured on the device, before resolve_plan:
// "" when cuDNN's SDPA runs this model's attention at these shapes and
// precision, else why not (unset: the build has no cuDNN) ...
std::optional<std::string> cuda_cudnn_attention(const ModelConfig& cfg, BatchShape shape,
                                                Precision precision);
// ... and one layer's attention timed with `impl` (Flash, with the plan's
// kernel families, or Cudnn) for attention=auto.
AttentionTiming cuda_time_attention(AttentionImpl impl, const ModelConfig& cfg, BatchShape shape,
                                    Precision precision, const KernelChoices& kernels);
// The CUDA backend's workspaces for a resolved plan: what prepare() will
// allocate, for the memory check and the reported peak.
std::vector<Workspace> cuda_workspaces(const ModelConfig& cfg, BatchShape shape,
                                       const StepPlan& plan);

// Incremental decoding on the GPU (cuda/cuda_decoder.h).
struct CudaDecodeOptions {
  DType dtype = DType::BF16;  // weights, activations and cache: F32 or BF16
  // Batch-1 steps: our GEMV kernel (else cuBLASLt with M = 1), and one
  // captured CUDA graph replayed per token (else each kernel launched).
  bool own_gemv = true;
  bool graph = true;
  // With own_gemv: RMSNorm, RoPE with the cache append, SwiGLU and the
  // residual adds folded into the GEMVs (six kernels a layer, not ten);
  // false keeps the unfused kernels, for timing them side by side.
  bool fused = true;
  // With fused: each fused kernel launched programmatically (PDL), its
  // weights streaming while the kernel before it finishes.
  bool programmatic = true;
};
// params: tinyllama's flat layout (ParamLayout of cfg); max_positions
// bounds prompt + generated tokens. Throws RuntimeFailure without a device
// or CUDA in the build, UsageError for a dtype it does not compute in.
std::unique_ptr<TokenDecoder> make_cuda_decoder(const ModelConfig& cfg,
                                                const std::vector<double>& params,
                                                int max_positions,
                                                const CudaDecodeOptions& options);

}  // namespace tinyllama
