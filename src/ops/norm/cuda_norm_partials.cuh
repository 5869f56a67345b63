#pragma once
// The RMSNorm backward kernels' weight-gradient partial rows (cuda_rmsnorm.cu,
// cuda_rmsnorm_team.cuh): each block writes the sum of its column sums as one
// row of a workspace, and the rows are added in one fixed order, by the
// kernel's own last blocks or by a second kernel (sum_partials_kernel), so
// the weight gradient does not depend on scheduling.
#include <cstdint>

namespace tinyllama::cuda::norm_partials {

// After every warp (or team of warps) has left its column sums in
// column_sums ([sum_rows][dim] in shared memory): the block's sum of them,
// in row order, as its row of partials.
__device__ __forceinline__ void write_block_partial(float* __restrict__ partials,
                                                    const float* column_sums, int sum_rows,
                                                    std::int64_t dim) {
  __syncthreads();
  float* block_row = partials + static_cast<std::int64_t>(blockIdx.x) * dim;
  for (std::int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    float sum = 0.f;
    for (int r = 0; r < sum_rows; ++r) sum += column_sums[r * dim + c];  // fixed order
    block_row[c] = sum;
  }
}

// dw[c] = sum of partials[b][c] over b, in a fixed order: kSumGroups
// strided groups of rows (group g: rows g, g + kSumGroups, ...), then the
// groups in order. sum_partials_kernel and reduce_partials_in_kernel both
// add in this order, so either gives the same bits.
constexpr int kSumGroups = 8;
// Blocks that do the in-kernel reduction: the last ones to arrive.
constexpr unsigned kReducerBlocks = 16;

// The in-kernel form (counters non-null, two zeroed unsigneds): every block
// counts itself in once its partial row is visible; the last kReducerBlocks
// to arrive wait until all have (every other block is resident or done by
// then: it has arrived, or it is one of fewer than kReducerBlocks still
// running), then split the columns in slices of 32 and add the rows as
// sum_partials_kernel does. The last reducer to finish zeroes the counters
// for the next launch. `smem`: the kernel's dynamic shared memory, free
// again here, at least kSumGroups * 32 floats.
__device__ __forceinline__ void reduce_partials_in_kernel(float* __restrict__ dw,
                                                          const float* __restrict__ partials,
                                                          unsigned* counters, std::int64_t dim,
                                                          float* smem) {
  if (counters == nullptr) return;
  __threadfence();  // this thread's part of the block's row, visible device-wide
  __syncthreads();  // ... for every thread, and the shared memory no longer read
  auto* ticket_slot = reinterpret_cast<unsigned*>(smem);
  if (threadIdx.x == 0) *ticket_slot = atomicAdd(&counters[0], 1u);
  __syncthreads();
  const unsigned ticket = *ticket_slot;
  const unsigned blocks = gridDim.x;
  const unsigned reducers = blocks < kReducerBlocks ? blocks : kReducerBlocks;
  if (ticket < blocks - reducers) return;  // whole blocks leave together
  const unsigned reducer = ticket - (blocks - reducers);
  if (threadIdx.x == 0) {
    while (*static_cast<volatile unsigned*>(&counters[0]) < blocks) __nanosleep(64);
  }
  __syncthreads();
  __threadfence();
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  float(*group_sum)[32] = reinterpret_cast<float(*)[32]>(smem);
  const std::int64_t slices = (dim + 31) / 32;
  for (std::int64_t slice = reducer; slice < slices; slice += reducers) {
    const std::int64_t c = slice * 32 + lane;
    for (int g = warp; g < kSumGroups; g += warps) {
      float sum = 0.f;
      if (c < dim) {
        for (unsigned b = g; b < blocks; b += kSumGroups) sum += __ldcg(partials + b * dim + c);
      }
      group_sum[g][lane] = sum;
    }
    __syncthreads();
    if (warp == 0 && c < dim) {
      float total = 0.f;
      for (int g = 0; g < kSumGroups; ++g) total += group_sum[g][lane];
      dw[c] = total;
    }
    __syncthreads();  // group_sum is rewritten by the next slice
  }
  if (threadIdx.x == 0 && atomicAdd(&counters[1], 1u) == reducers - 1) {
    counters[0] = 0;
    counters[1] = 0;
  }
}

}  // namespace tinyllama::cuda::norm_partials
