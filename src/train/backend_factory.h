#pragma once
// Picks the concrete backend for a device. It lives above the backends
// (src/cpu, src/cuda), which the model layer never names.
#include <memory>

#include "model/backend.h"
#include "model/step_plan.h"

namespace tinyllama {

std::unique_ptr<Backend> make_backend(DeviceKind device, Precision precision);
// What the device's backend can do, without creating one (resolve_plan's input).
DeviceCaps device_caps(DeviceKind device);

}  // namespace tinyllama
