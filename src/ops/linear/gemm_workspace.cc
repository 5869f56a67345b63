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
constexpr std::int64_t kForwardCap = 32 * kMiB;  // the library's recommendation on Hopper
constexpr std::int64_t kForward16Bit = kMiB;
constexpr std::int64_t kWeightGradientCap = 16 * kMiB;

std::int64_t split_k_bytes(std::int64_t output_elems, std::int64_t cap) {
  return std::min(cap,
                  std::max<std::int64_t>(output_elems, 0) * kSplitKBytesPerElement + kSlackBytes);
}

}  // namespace

std::int64_t forward_gemm_workspace_bytes(std::int64_t largest_output_elems, bool fp32_compute) {
  return fp32_compute ? split_k_bytes(largest_output_elems, kForwardCap) : kForward16Bit;
}

std::int64_t weight_gradient_gemm_workspace_bytes(std::int64_t largest_output_elems) {
  return split_k_bytes(largest_output_elems, kWeightGradientCap);
}

}  // namespace tinyllama
