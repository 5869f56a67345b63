// Entry points of a build without the CUDA toolkit: there is no GPU backend.
#include "core/errors.h"
#include "cuda/cuda_entry.h"

namespace tinyllama {

std::unique_ptr<Backend> make_cuda_backend(Precision) {
  throw RuntimeFailure(
      "--device cuda: this build of tinyllama has no CUDA backend (built without the CUDA "
      "toolkit)");
}
std::unique_ptr<TokenDecoder> make_cuda_decoder(const ModelConfig&, const std::vector<double>&, int,
                                                const CudaDecodeOptions&) {
  throw RuntimeFailure(
      "--device cuda: this build of tinyllama has no CUDA backend (built without the CUDA "
      "toolkit)");
}
bool cuda_device_available() {
  return false;
}
std::string cuda_device_description() {
  return "none (built without CUDA)";
}
bool cuda_memory_info(std::size_t*, std::size_t*) {
  return false;
}
bool cuda_pci_bus_id(std::string*) {
  return false;
}
DeviceCaps cuda_device_caps() {
  DeviceCaps caps;
  caps.kind = DeviceKind::Cuda;
  caps.no_programmatic_launch = "this build has no CUDA";
  return caps;
}
std::optional<std::string> cuda_cudnn_attention(const ModelConfig&, BatchShape, Precision) {
  return std::nullopt;
}
AttentionTiming cuda_time_attention(AttentionImpl, const ModelConfig&, BatchShape, Precision,
                                    const KernelChoices&) {
  throw RuntimeFailure("attention=auto: this build of tinyllama has no CUDA backend");
}
std::vector<Workspace> cuda_workspaces(const ModelConfig&, BatchShape, const StepPlan&) {
  return {};
}
std::string cuda_build_versions() {
  return "CUDA none, cuDNN none (CPU-only build)";
}

}  // namespace tinyllama
