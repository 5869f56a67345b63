#include "ops/linear/gemm_workspace.h"

#include <algorithm>

namespace tinyllama {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;
// A split-K algorithm's partial sums: fp32, one per output element.
constexpr std::int64_t kSplitKBytesPerElement = 4;
// Above the 16 bytes cuBLASLt asked for beyond the partial sums; a whole
// 4 KiB keeps the size a multiple of the allocator's granule.
constexpr std::int64_t kSlackBytes = 4096;
constexpr std::int64_t kLibraryRecommended = 32 * kMiB;  // on Hopper
constexpr std::int64_t kForward16Bit = kMiB;
constexpr std::int64_t kWeightGradient16BitCap = 16 * kMiB;

}  // namespace

std::int64_t forward_gemm_workspace_bytes(bool fp32_compute) {
  return fp32_compute ? kLibraryRecommended : kForward16Bit;
}

std::int64_t weight_gradient_gemm_workspace_bytes(std::int64_t largest_output_elems,
                                                  bool fp32_compute) {
  if (fp32_compute) return kLibraryRecommended;
  const std::int64_t split_k =
      std::max<std::int64_t>(largest_output_elems, 0) * kSplitKBytesPerElement + kSlackBytes;
  return std::min(kWeightGradient16BitCap, split_k);
}

}  // namespace tinyllama
