#pragma once
// Creates the backend for a device; see cuda_entry.h for the CUDA queries.
#include <memory>

#include "model/backend.h"
#include "model/cuda_entry.h"
#include "train/options.h"

namespace tinyllama {

std::unique_ptr<Backend> make_backend(DeviceKind device, Precision precision);

}  // namespace tinyllama
