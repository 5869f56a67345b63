#pragma once
// The RMSNorm backward with each thread's slice of dy, x, w and of the
// column sums in registers (Chunks vectors of Vec columns, the same columns
// for every row): a team of TeamWarps warps takes one row at a time. One
// warp (TeamWarps 1) holds rows of up to 32 * 4 vectors (D 1024 in bf16,
// 512 in fp32); longer rows take teams of 4 or 8 warps, since a single warp
// would need more registers than leave a second block room on the SM. A
// team's dot product is summed through shared memory (one named barrier a
// row). The grid is at most the blocks resident at once, each looping over
// rows, so that a block writes one partial row for all of them.
#include <cstdint>

#include "device/arch/ptx.cuh"
#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "device/cuda_vec.cuh"
#include "ops/norm/cuda_norm_common.cuh"
#include "ops/norm/cuda_norm_partials.cuh"

namespace tinyllama::cuda::norm_team {

// dx and dweight as rmsnorm_backward_kernel (cuda_rmsnorm.cu) computes them;
// a team adds the dot product in another order (each warp's lanes, then the
// team's warps in order). Thread t of a team holds the vectors
// t + 32 * TeamWarps * c, c < Chunks. dim % Vec == 0. dx may alias dy, x or
// dres: each element is read by the thread that writes it, before the write.
template <typename T, typename W, int Vec, int Chunks, int TeamWarps>
__device__ __forceinline__ void backward_rows(T* dx, std::int64_t ld_dx,
                                              float* __restrict__ partials, float* __restrict__ dw,
                                              unsigned* counters, const T* dy, std::int64_t ld_dy,
                                              const T* dres, std::int64_t ld_dres, const T* x,
                                              std::int64_t ld_x, const W* __restrict__ w,
                                              const float* __restrict__ rstd, std::int64_t ld_rstd,
                                              std::int64_t rows, std::int64_t dim) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  constexpr int kTeamThreads = TeamWarps * 32;
  extern __shared__ float team_dw[];  // [teams][dim], written once at the end
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int team = warp / TeamWarps;
  const int teams = (blockDim.x >> 5) / TeamWarps;
  const int t = (warp % TeamWarps) * 32 + lane;
  const std::int64_t chunks = dim / Vec;
  float wv[Chunks][Vec], acc[Chunks][Vec];
#pragma unroll
  for (int c = 0; c < Chunks; ++c) {
    const std::int64_t ch = t + kTeamThreads * c;
#pragma unroll
    for (int k = 0; k < Vec; ++k) wv[c][k] = acc[c][k] = 0.f;
    if (ch < chunks) load_f32<Vec>(w + ch * Vec, wv[c]);
  }
  [[maybe_unused]] int slot = 0;  // teams: dot_parts' row slot
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * teams + team; r < rows;
       r += static_cast<std::int64_t>(gridDim.x) * teams) {
    const T* dyr = dy + r * ld_dy;
    const T* xr = x + r * ld_x;
    float g[Chunks][Vec], xv[Chunks][Vec];
    float dot = 0.f;
#pragma unroll
    for (int c = 0; c < Chunks; ++c) {
      const std::int64_t ch = t + kTeamThreads * c;
#pragma unroll
      for (int k = 0; k < Vec; ++k) g[c][k] = xv[c][k] = 0.f;
      if (ch < chunks) {
        load_f32<Vec>(dyr + ch * Vec, g[c]);
        load_f32<Vec>(xr + ch * Vec, xv[c]);
      }
#pragma unroll
      for (int k = 0; k < Vec; ++k) dot += g[c][k] * wv[c][k] * xv[c][k];
    }
    float total = warp_sum(dot);
    if constexpr (TeamWarps > 1) {
      // Each warp's part of the row's dot product; two rows' worth, so that
      // one barrier a row is enough (a slot is rewritten two rows later,
      // after every reader of it has passed the barrier of the row between).
      __shared__ float dot_parts[2][kNormWarpsPerBlock];
      if (lane == 0) dot_parts[slot][warp] = total;
      arch::named_barrier(1 + team, kTeamThreads);  // ids 1-2: 0 is __syncthreads
      total = 0.f;
#pragma unroll
      for (int j = 0; j < TeamWarps; ++j) total += dot_parts[slot][team * TeamWarps + j];
      slot ^= 1;
    }
    const float inv = rstd[r * ld_rstd];
    const float coef = total * inv * inv * inv / static_cast<float>(dim);
    T* dxr = dx + r * ld_dx;
#pragma unroll
    for (int c = 0; c < Chunks; ++c) {
      const std::int64_t ch = t + kTeamThreads * c;
      float out[Vec], res[Vec] = {};
      if (dres != nullptr && ch < chunks) load_f32<Vec>(dres + r * ld_dres + ch * Vec, res);
#pragma unroll
      for (int k = 0; k < Vec; ++k) {
        acc[c][k] += g[c][k] * xv[c][k] * inv;
        out[k] = inv * g[c][k] * wv[c][k] - coef * xv[c][k] + res[k];
      }
      if (ch < chunks) store_f32<Vec>(dxr + ch * Vec, out);
    }
  }
  float* mine = team_dw + team * dim;
#pragma unroll
  for (int c = 0; c < Chunks; ++c) {
    const std::int64_t ch = t + kTeamThreads * c;
    if (ch < chunks) {
#pragma unroll
      for (int k = 0; k < Vec; ++k) mine[ch * Vec + k] = acc[c][k];
    }
  }
  norm_partials::write_block_partial(partials, team_dw, teams, dim);
  norm_partials::reduce_partials_in_kernel(dw, partials, counters, dim, team_dw);
}

// One warp a row (rows of up to 32 * 4 vectors). No launch bounds: with
// (256, 1) ptxas gave the two-vector form 100 registers instead of 91, and
// the kernel bench at D 512 in bf16 ran 5 % slower.
template <typename T, typename W, int Vec, int Chunks>
__global__ void rmsnorm_backward_warp_kernel(T* dx, std::int64_t ld_dx,
                                             float* __restrict__ partials, float* __restrict__ dw,
                                             unsigned* counters, const T* dy, std::int64_t ld_dy,
                                             const T* dres, std::int64_t ld_dres, const T* x,
                                             std::int64_t ld_x, const W* __restrict__ w,
                                             const float* __restrict__ rstd, std::int64_t ld_rstd,
                                             std::int64_t rows, std::int64_t dim) {
  backward_rows<T, W, Vec, Chunks, 1>(dx, ld_dx, partials, dw, counters, dy, ld_dy, dres, ld_dres,
                                      x, ld_x, w, rstd, ld_rstd, rows, dim);
}

// Teams of 4 or 8 warps. Three blocks an SM where a thread holds at most two
// 16-byte vectors of a 2-byte dtype (80 registers): 2-6 % faster than two at
// D 2048 in bf16 (the kernel bench at 1b); in fp32 the bound made
// rmsnorm.bwd 3-5 % slower.
template <typename T, typename W, int Vec, int Chunks, int TeamWarps>
__global__ void __launch_bounds__(kNormWarpsPerBlock * 32, Vec == 8 && Chunks <= 2 ? 3 : 1)
    rmsnorm_backward_team_kernel(T* dx, std::int64_t ld_dx, float* __restrict__ partials,
                                 float* __restrict__ dw, unsigned* counters, const T* dy,
                                 std::int64_t ld_dy, const T* dres, std::int64_t ld_dres,
                                 const T* x, std::int64_t ld_x, const W* __restrict__ w,
                                 const float* __restrict__ rstd, std::int64_t ld_rstd,
                                 std::int64_t rows, std::int64_t dim) {
  static_assert(TeamWarps > 1, "one warp a row: rmsnorm_backward_warp_kernel");
  backward_rows<T, W, Vec, Chunks, TeamWarps>(dx, ld_dx, partials, dw, counters, dy, ld_dy, dres,
                                              ld_dres, x, ld_x, w, rstd, ld_rstd, rows, dim);
}

}  // namespace tinyllama::cuda::norm_team
