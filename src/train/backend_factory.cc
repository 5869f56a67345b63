#include "train/backend_factory.h"

#include "cpu/cpu_backend.h"
#include "cuda/cuda_entry.h"

namespace tinyllama {

std::unique_ptr<Backend> make_backend(DeviceKind device, Precision precision) {
  if (device == DeviceKind::Cuda) return make_cuda_backend(precision);
  return std::make_unique<CpuBackend>(CpuKernels::Fast);
}

DeviceCaps device_caps(DeviceKind device) {
  return device == DeviceKind::Cuda ? cuda_device_caps() : DeviceCaps::cpu();
}

DeviceCaps run_caps(DeviceCaps caps, const PlanRequest& request, const ModelConfig& cfg,
                    BatchShape shape) {
  if (caps.kind != DeviceKind::Cuda) return caps;
  caps.cudnn_attention = cuda_cudnn_attention(cfg, shape, request.precision);
  if (attention_timings_wanted(request, caps, cfg)) {
    // Flash is timed with the kernel families the plan will run.
    const KernelChoices kernels =
        resolve_kernels(caps, cfg, shape, request.precision.compute, request.kernel_pins);
    caps.flash_timing =
        cuda_time_attention(AttentionImpl::Flash, cfg, shape, request.precision, kernels);
    caps.cudnn_timing =
        cuda_time_attention(AttentionImpl::Cudnn, cfg, shape, request.precision, kernels);
  }
  return caps;
}

std::vector<Workspace> backend_workspaces(DeviceKind device, const ModelConfig& cfg,
                                          BatchShape shape, const StepPlan& plan) {
  if (device != DeviceKind::Cuda) return {};
  return cuda_workspaces(cfg, shape, plan);
}

StepPlan plan_for_run(const PlanRequest& request, DeviceKind device, const ModelConfig& cfg,
                      BatchShape shape) {
  const DeviceCaps caps = run_caps(device_caps(device), request, cfg, shape);
  StepPlan plan = resolve_plan(request, caps, cfg, shape);
  plan.workspaces = backend_workspaces(device, cfg, shape, plan);
  return plan;
}

}  // namespace tinyllama
