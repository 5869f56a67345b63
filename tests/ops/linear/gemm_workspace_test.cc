// The cuBLASLt workspaces' sizes against what the chosen algorithms asked
// for on an H200 (docs/log/2026-11-29.md, sixth session, call 1): a
// workspace smaller than a measured need would drop the algorithm the step
// ran there.
#include "ops/linear/gemm_workspace.h"

#include <gtest/gtest.h>

namespace tinyllama {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

TEST(GemmWorkspace, CoversTheSplitKNeedsMeasuredAtTheWeightGradients) {
  // The workshop model (D512 F2048; B8 S128 and B32 S1024): the gate/up
  // weight gradient, [2F, D], asked for 8 MiB + 16 bytes.
  EXPECT_GE(weight_gradient_gemm_workspace_bytes(4096 * 512), 8 * kMiB + 16);
  // The GPT-2 size (D768 F2048, vocabulary 50 257): 9 MiB + 16 bytes. Its
  // largest weight gradient is the LM head's, [50 304, 768].
  EXPECT_GE(weight_gradient_gemm_workspace_bytes(50304LL * 768), 9437200);
}

TEST(GemmWorkspace, CoversTheFp32ForwardSplitMeasuredAtTheWorkshop) {
  // Workshop fp32 B8 S128: the forward GEMMs' largest output, gate/up's
  // [1024, 4096], chose an algorithm that asked for 16 MiB.
  EXPECT_GE(forward_gemm_workspace_bytes(1024 * 4096, /*fp32_compute=*/true), 16 * kMiB);
}

TEST(GemmWorkspace, StaysWithinTheLibrarysRecommendation) {
  // 32 MiB on Hopper: a larger workspace buys no measured algorithm.
  for (const std::int64_t elems : {std::int64_t{0}, std::int64_t{1} << 20, std::int64_t{1} << 30}) {
    EXPECT_LE(forward_gemm_workspace_bytes(elems, true), 32 * kMiB);
    EXPECT_LE(forward_gemm_workspace_bytes(elems, false), 32 * kMiB);
    EXPECT_LE(weight_gradient_gemm_workspace_bytes(elems), 32 * kMiB);
  }
}

TEST(GemmWorkspace, SixteenBitForwardGemmsGetLittle) {
  // No forward or data-gradient GEMM of a 16-bit step asked for more than
  // 4 bytes, from the workshop model to 1 B parameters.
  EXPECT_GE(forward_gemm_workspace_bytes(8192LL * 16384, false), 4);
  EXPECT_LE(forward_gemm_workspace_bytes(8192LL * 16384, false), kMiB);
}

TEST(GemmWorkspace, GrowsWithTheOutputBelowTheCap) {
  EXPECT_LT(weight_gradient_gemm_workspace_bytes(512 * 512),
            weight_gradient_gemm_workspace_bytes(2048 * 512));
  EXPECT_LT(forward_gemm_workspace_bytes(512 * 512, true),
            forward_gemm_workspace_bytes(2048 * 512, true));
}

}  // namespace
}  // namespace tinyllama
