#pragma once
// The CUDA backend's entry points. Defined in src/cuda/ when the toolkit is
// present, and by no_cuda_stub.cc (the only file of this folder such a
// build compiles) otherwise, so the rest of the
// engine never needs #ifdefs.
#include <cstddef>
#include <memory>
#include <string>

#include "model/backend.h"

namespace tinyllama {

std::unique_ptr<Backend> make_cuda_backend(Precision precision);
bool cuda_device_available();
std::string cuda_device_description();
bool cuda_memory_info(std::size_t* free_bytes, std::size_t* total_bytes);
std::string cuda_build_versions();
// What the CUDA backend can do (graphs, parallel branches, the flash
// kernels' head_dims) and how it sizes its workspaces for a plan; needs no
// device. A build without CUDA says: nothing (eager, no kernels).
DeviceCaps cuda_device_caps();

}  // namespace tinyllama
