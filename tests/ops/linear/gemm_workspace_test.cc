// The cuBLASLt workspaces' sizes against what the chosen algorithms asked
// for on an H200 (docs/log/2026-11-29.md, sixth session, calls 1 and 2): a
// workspace smaller than a measured need would drop the algorithm the step
// ran there.
#include "ops/linear/gemm_workspace.h"

#include <gtest/gtest.h>

namespace tinyllama {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

TEST(GemmWorkspace, CoversTheSplitKNeedsMeasuredAtSixteenBitWeightGradients) {
  // The workshop model (D512 F2048 V1000, B32 S1024): its largest weight
  // gradient is gate/up's [4096, 512]; its split asked for 8 MiB + 16 bytes.
  EXPECT_GE(weight_gradient_gemm_workspace_bytes(4096 * 512, false), 8 * kMiB + 16);
  // The GPT-2 size (D768 F2048, vocabulary 50 257, the LM head's [50 304, 768]
  // the largest): 9 MiB + 16 bytes.
  EXPECT_GE(weight_gradient_gemm_workspace_bytes(50304LL * 768, false), 9437200);
}

TEST(GemmWorkspace, Fp32KeepsTheLibrarysSize) {
  // Offered only what its splits asked for at 32 MiB (16 and 8 MiB), the
  // fp32 workshop step got no split and ran 11-20 % slower.
  EXPECT_EQ(forward_gemm_workspace_bytes(true), 32 * kMiB);
  EXPECT_EQ(weight_gradient_gemm_workspace_bytes(4096 * 512, true), 32 * kMiB);
}

TEST(GemmWorkspace, SixteenBitForwardGemmsGetLittle) {
  // No forward or data-gradient GEMM of a 16-bit step asked for more than
  // 4 bytes, from the workshop model to 1 B parameters.
  EXPECT_GE(forward_gemm_workspace_bytes(false), 4);
  EXPECT_LE(forward_gemm_workspace_bytes(false), kMiB);
}

TEST(GemmWorkspace, SixteenBitWeightGradientsGrowWithTheOutputUpToACap) {
  EXPECT_LT(weight_gradient_gemm_workspace_bytes(512 * 512, false),
            weight_gradient_gemm_workspace_bytes(2048 * 512, false));
  EXPECT_LE(weight_gradient_gemm_workspace_bytes(std::int64_t{1} << 30, false), 16 * kMiB);
}

}  // namespace
}  // namespace tinyllama
