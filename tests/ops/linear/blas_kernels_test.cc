// The OpenBLAS kernel override (ops/linear/cpu_blas_kernels.h): only a generic
// fallback choice is replaced, by the best kernels the CPU's features run.
#include <gtest/gtest.h>

#include "ops/linear/cpu_blas_kernels.h"

namespace tinyllama::cpu {
namespace {

TEST(BlasKernels, AFallbackChoiceBecomesTheBestKernelsTheCpuRuns) {
  const CpuFeatures avx2{true, false, false};
  const CpuFeatures avx512{true, true, false};
  const CpuFeatures bf16{true, true, true};
  EXPECT_EQ(better_blas_core("Prescott", bf16), "Cooperlake");
  EXPECT_EQ(better_blas_core("Prescott", avx512), "SkylakeX");
  EXPECT_EQ(better_blas_core("Nehalem", avx2), "Haswell");
  EXPECT_EQ(better_blas_core("Sandybridge", avx512), "SkylakeX");
  EXPECT_EQ(better_blas_core("Prescott", CpuFeatures{}), "") << "an SSE-only CPU keeps Prescott";
}

TEST(BlasKernels, AModelOpenBlasKnowsKeepsItsChoice) {
  const CpuFeatures bf16{true, true, true};
  for (const char* known : {"Zen", "Haswell", "SkylakeX", "Cooperlake", "SapphireRapids"}) {
    EXPECT_EQ(better_blas_core(known, bf16), "") << known;
  }
}

}  // namespace
}  // namespace tinyllama::cpu
