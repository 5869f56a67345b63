#pragma once
// The building blocks the flash kernels are written in (cuda/arch/: inline
// PTX for cp.async, ldmatrix and mma.sync; mbarriers, TMA, bulk copies and
// wgmma on Hopper; swizzled tiles), called unqualified from the flash namespace.
#include "cuda/arch/bulk.cuh"
#include "cuda/arch/ptx.cuh"
#include "cuda/arch/tma.cuh"
#include "cuda/arch/wgmma.cuh"
#include "cuda/arch/wgmma_tiles.cuh"

namespace tinyllama::cuda::flash {
using namespace tinyllama::cuda::arch;  // NOLINT(google-build-using-namespace): one project's
                                        // layers
}  // namespace tinyllama::cuda::flash
