#pragma once
// The building blocks the flash kernels are written in (device/arch/: inline
// PTX for cp.async, ldmatrix and mma.sync; mbarriers, TMA, bulk copies and
// wgmma on Hopper; swizzled tiles), called unqualified from the flash namespace.
#include "device/arch/bulk.cuh"
#include "device/arch/ptx.cuh"
#include "device/arch/tma.cuh"
#include "device/arch/wgmma.cuh"
#include "device/arch/wgmma_tiles.cuh"

namespace tinyllama::cuda::flash {
using namespace tinyllama::cuda::arch;  // NOLINT(google-build-using-namespace): one project's
                                        // layers
}  // namespace tinyllama::cuda::flash
