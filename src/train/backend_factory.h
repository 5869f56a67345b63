#pragma once
// Picks the concrete backend for a device, and gathers the device's facts a
// plan is resolved from. It lives above the backends (src/cpu, src/cuda),
// which the model layer never names: resolve_plan reads facts handed to it
// and never calls into a backend.
#include <memory>
#include <vector>

#include "model/backend.h"
#include "model/step_plan.h"

namespace tinyllama {

std::unique_ptr<Backend> make_backend(DeviceKind device, Precision precision);
// What the device's backend can do, without creating one: its static facts.
DeviceCaps device_caps(DeviceKind device);
// A device's static facts (device_caps(), a backend's caps()) with what this
// run's plan needs measured on the device: on CUDA, whether cuDNN runs the
// model's attention at these shapes, and attention=auto's timings of flash
// and cuDNN where resolve_plan would compare them (attention_timings_wanted).
DeviceCaps run_caps(DeviceCaps caps, const PlanRequest& request, const ModelConfig& cfg,
                    BatchShape shape);
// The device's backend's workspaces for a resolved plan: what prepare()
// allocates, for the memory check and the reported peak (none on the CPU).
std::vector<Workspace> backend_workspaces(DeviceKind device, const ModelConfig& cfg,
                                          BatchShape shape, const StepPlan& plan);
// resolve_plan on run_caps(), then the plan's workspaces (backend_workspaces).
StepPlan plan_for_run(const PlanRequest& request, DeviceKind device, const ModelConfig& cfg,
                      BatchShape shape);

}  // namespace tinyllama
