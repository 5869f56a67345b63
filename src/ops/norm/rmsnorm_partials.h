#pragma once
// RMSNorm's backward writes its weight gradient as partial rows, one per
// block of its grid, and sums them again (in the kernel's last blocks, or
// in a second kernel): what both the kernels (ops/norm/cuda_rmsnorm.cu) and
// the cost model (prof/access_trace.cc) need to know of them.
#include <algorithm>
#include <cstdint>

namespace tinyllama {

// Partial rows the backward pass uses at most (blocks of its grid, which is
// also capped at the blocks resident at once: 2-3 per SM of an H100 at the
// model's widths); the workspace is this many rows of hidden_dim floats.
inline constexpr int kRmsnormPartialRows = 1056;

// The bytes of partial sums a backward call over rows x dim writes and
// reads back: at most kRmsnormPartialRows rows (and no more than the rows),
// fp32, each written once and read once. An upper bound: the grid's cap at
// the blocks resident is a device fact the cost model does not have (on an
// H200 the 1 B shapes' grid ran about 885 blocks of the 1 056).
inline std::int64_t rmsnorm_partial_sum_bytes(std::int64_t rows, std::int64_t dim) {
  const std::int64_t partial_rows = std::min<std::int64_t>(rows, kRmsnormPartialRows);
  return 2 * partial_rows * dim * static_cast<std::int64_t>(sizeof(float));
}

}  // namespace tinyllama
