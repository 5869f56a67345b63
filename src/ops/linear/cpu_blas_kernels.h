#pragma once
// Which OpenBLAS kernels this CPU should run. Debian 12's OpenBLAS 0.3.21
// picks its kernels by CPU model at load time, and on a model newer than
// it knows (seen on an AVX-512 Xeon) falls back to its Prescott (SSE3)
// kernels: 24 GFLOP/s a core where its Cooperlake kernels, which that CPU
// runs, reach 94-108, so the CPU quick start took 7 min 44 s instead of 3.
// OPENBLAS_CORETYPE overrides the choice, but only when set before the
// library loads: tinyllama's main re-executes itself once with it set.
#include <string>

namespace tinyllama::cpu {

struct CpuFeatures {
  bool avx2_fma = false;     // Haswell's kernels
  bool avx512 = false;       // F, BW, DQ, VL: SkylakeX's
  bool avx512_bf16 = false;  // Cooperlake's
};

CpuFeatures this_cpu();

// The OPENBLAS_CORETYPE for the best kernels `cpu` runs when OpenBLAS chose
// `chosen`, one of its generic fallbacks (Prescott, Core2, Penryn,
// Dunnington, Nehalem, Sandybridge: older than a CPU with AVX2); "" when
// the choice stands (a model it knows, "Zen", "Haswell", "SkylakeX", ...).
std::string better_blas_core(const std::string& chosen, const CpuFeatures& cpu);

}  // namespace tinyllama::cpu
