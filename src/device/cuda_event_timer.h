#pragma once
// EventTimer on CUDA events: the backend's phase timer and the start-up
// timing of attention=auto share it.
#include <cuda_runtime.h>

#include <memory>

#include "model/device_services.h"

namespace tinyllama::cuda {

// `marks` events recorded on `stream`; records inside a stream capture
// become graph nodes, so timing survives whole-step graphs.
std::unique_ptr<EventTimer> make_event_timer(int marks, cudaStream_t stream);

}  // namespace tinyllama::cuda
