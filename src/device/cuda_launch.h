#pragma once
// Which streams launch their kernels with programmatic dependent launch
// (PDL). The setting belongs to a stream, not to a process or a thread:
// several backends may live in one process (tests, data-parallel ranks on
// threads), each registering the streams it owns for its plan's
// kernel_launch choice, while a kernel bench or a test on a stream of its
// own keeps plain launches. Every stream is plain until a backend says
// otherwise. cuda_launch.cuh's launch_kernel() reads it.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace tinyllama::cuda {

// Turns PDL on or off for the kernels launched on `stream` from now on (an
// off stream is forgotten). The owner turns it off before destroying the
// stream, since a new stream may reuse the handle.
void set_programmatic_launch(cudaStream_t stream, bool on);
bool programmatic_launch(cudaStream_t stream);

// "" when the current device takes programmatic launches of this build's
// kernels, else why not (DeviceCaps::no_programmatic_launch): the device
// must be sm_90 or newer, and the kernels compiled for it (a kernel built
// for an older architecture has no wait in it, so it must run plainly).
std::string programmatic_launch_unsupported();

// The current device's SM count, for grids sized to the GPU; asked of the
// driver once per device.
int current_device_sm_count();

// Blocks of `kernel` (a __global__ function) of `block_threads` threads and
// `smem` bytes of dynamic shared memory that one SM holds at once, at least
// 1; asked of the runtime once per kernel and sizes (an eager step asks for
// every launch).
int resident_blocks_per_sm(const void* kernel, int block_threads, std::size_t smem);

}  // namespace tinyllama::cuda
