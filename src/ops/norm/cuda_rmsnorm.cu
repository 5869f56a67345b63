// RMSNorm, y = x / sqrt(mean(x^2) + eps) * w, statistics in fp32. One warp
// per row: a row of the model (D = 512 bf16 is 1 KB) is a few 16-byte loads
// per lane and a shuffle reduction, with no block-wide barrier per row. The
// weight gradient sums over rows; doing that with atomics would make it
// depend on scheduling, so each warp keeps its own column sums, each block
// writes the sum of its warps as one row of a workspace, and those rows are
// added in a fixed order: by a second kernel, or, on grids small enough
// (the launch-bound sizes, where a second kernel is one launch more per
// norm on the backward's critical path), by the backward kernel's own last
// blocks once every block has written its row (reduce_partials_in_kernel).
//
// Backward, rows of up to 8 * 32 * 4 vectors (D 8192 in bf16): a thread's
// columns are the same for every row, so its slice of dy, x, w and of the
// column sums stays in registers, one warp a row up to 32 * 4 vectors and a
// team of warps beyond (cuda_rmsnorm_team.cuh). Longer rows, and rows not a
// whole number of vectors, keep the column sums in shared memory instead
// (rmsnorm_backward_kernel); that path is bank-conflicted (lane stride Vec
// floats) and rereads each row, which is why it is only the fallback.
#include <algorithm>

#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "device/cuda_launch.h"
#include "device/cuda_vec.cuh"
#include "ops/norm/cuda_norm_common.cuh"
#include "ops/norm/cuda_norm_partials.cuh"
#include "ops/norm/cuda_rmsnorm.h"
#include "ops/norm/cuda_rmsnorm_team.cuh"

namespace tinyllama::cuda {
namespace {

using norm_partials::kSumGroups;
using norm_partials::reduce_partials_in_kernel;
using norm_partials::write_block_partial;

template <typename T, typename W, int Vec>
__global__ void rmsnorm_forward_kernel(T* out, std::int64_t ld_out, float* __restrict__ rstd,
                                       std::int64_t ld_rstd, const T* x, std::int64_t ld_x,
                                       const W* __restrict__ w, std::int64_t rows, std::int64_t dim,
                                       float eps) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = (static_cast<std::int64_t>(gridDim.x) * blockDim.x) >> 5;
  const std::int64_t chunks = dim / Vec;
  for (std::int64_t r = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
       r < rows; r += warps) {
    const T* xr = x + r * ld_x;
    float ss = 0.f;
    for (std::int64_t ch = lane; ch < chunks; ch += 32) {
      float v[Vec];
      load_f32<Vec>(xr + ch * Vec, v);
#pragma unroll
      for (int k = 0; k < Vec; ++k) ss += v[k] * v[k];
    }
    const float inv = rsqrtf(warp_sum(ss) / static_cast<float>(dim) + eps);
    T* yr = out + r * ld_out;
    for (std::int64_t ch = lane; ch < chunks; ch += 32) {  // the row is in L1 by now
      float v[Vec], wv[Vec];
      load_f32<Vec>(xr + ch * Vec, v);
      load_f32<Vec>(w + ch * Vec, wv);
#pragma unroll
      for (int k = 0; k < Vec; ++k) v[k] = v[k] * inv * wv[k];
      store_f32<Vec>(yr + ch * Vec, v);
    }
    if (lane == 0) rstd[r * ld_rstd] = inv;
  }
}

// rmsnorm_forward_kernel's output loop with the stored rstd: the same
// products in the same order, so the same bits.
template <typename T, typename W, int Vec>
__global__ void rmsnorm_apply_kernel(T* out, std::int64_t ld_out, const float* __restrict__ rstd,
                                     std::int64_t ld_rstd, const T* x, std::int64_t ld_x,
                                     const W* __restrict__ w, std::int64_t rows, std::int64_t dim) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const int lane = threadIdx.x & 31;
  const std::int64_t warps = (static_cast<std::int64_t>(gridDim.x) * blockDim.x) >> 5;
  const std::int64_t chunks = dim / Vec;
  for (std::int64_t r = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
       r < rows; r += warps) {
    const T* xr = x + r * ld_x;
    const float inv = rstd[r * ld_rstd];
    T* yr = out + r * ld_out;
    for (std::int64_t ch = lane; ch < chunks; ch += 32) {
      float v[Vec], wv[Vec];
      load_f32<Vec>(xr + ch * Vec, v);
      load_f32<Vec>(w + ch * Vec, wv);
#pragma unroll
      for (int k = 0; k < Vec; ++k) v[k] = v[k] * inv * wv[k];
      store_f32<Vec>(yr + ch * Vec, v);
    }
  }
}

// dx_c = r * dy_c * w_c - r^3 / D * x_c * sum_j(dy_j * w_j * x_j)
// dw_c = sum over rows of dy_c * x_c * r
// With dres (NormImpl::Fused): dx_c += dres_c, in fp32 before the rounding.
// dx may alias dy, x or dres (no __restrict__ on them): every element is read
// by the lane that writes it, before the write.
template <typename T, typename W, int Vec>
__global__ void rmsnorm_backward_kernel(T* dx, std::int64_t ld_dx, float* __restrict__ partials,
                                        float* __restrict__ dw, unsigned* counters, const T* dy,
                                        std::int64_t ld_dy, const T* dres, std::int64_t ld_dres,
                                        const T* x, std::int64_t ld_x, const W* __restrict__ w,
                                        const float* __restrict__ rstd, std::int64_t ld_rstd,
                                        std::int64_t rows, std::int64_t dim) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  extern __shared__ float dw_acc[];  // [warps per block][dim]
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int block_warps = blockDim.x >> 5;
  const std::int64_t chunks = dim / Vec;
  // A lane only ever touches the columns of its own chunks, in this slice.
  float* mine = dw_acc + warp * dim;
  for (std::int64_t ch = lane; ch < chunks; ch += 32) {
#pragma unroll
    for (int k = 0; k < Vec; ++k) mine[ch * Vec + k] = 0.f;
  }
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * block_warps + warp; r < rows;
       r += static_cast<std::int64_t>(gridDim.x) * block_warps) {
    const T* dyr = dy + r * ld_dy;
    const T* xr = x + r * ld_x;
    const float inv = rstd[r * ld_rstd];
    float dot = 0.f;
    for (std::int64_t ch = lane; ch < chunks; ch += 32) {
      float g[Vec], xv[Vec], wv[Vec];
      load_f32<Vec>(dyr + ch * Vec, g);
      load_f32<Vec>(xr + ch * Vec, xv);
      load_f32<Vec>(w + ch * Vec, wv);
#pragma unroll
      for (int k = 0; k < Vec; ++k) dot += g[k] * wv[k] * xv[k];
    }
    const float coef = warp_sum(dot) * inv * inv * inv / static_cast<float>(dim);
    T* dxr = dx + r * ld_dx;
    for (std::int64_t ch = lane; ch < chunks; ch += 32) {
      float g[Vec], xv[Vec], wv[Vec], out[Vec], res[Vec] = {};
      load_f32<Vec>(dyr + ch * Vec, g);
      load_f32<Vec>(xr + ch * Vec, xv);
      load_f32<Vec>(w + ch * Vec, wv);
      if (dres != nullptr) load_f32<Vec>(dres + r * ld_dres + ch * Vec, res);
#pragma unroll
      for (int k = 0; k < Vec; ++k) {
        mine[ch * Vec + k] += g[k] * xv[k] * inv;
        out[k] = inv * g[k] * wv[k] - coef * xv[k] + res[k];
      }
      store_f32<Vec>(dxr + ch * Vec, out);
    }
  }
  write_block_partial(partials, dw_acc, block_warps, dim);
  reduce_partials_in_kernel(dw, partials, counters, dim, dw_acc);
}

// The second-kernel form: threadIdx.y takes group threadIdx.y, then one
// thread adds the groups.
__global__ void sum_partials_kernel(float* __restrict__ dw, const float* __restrict__ partials,
                                    int blocks, std::int64_t dim) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  __shared__ float group_sum[kSumGroups][32];
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * 32 + threadIdx.x;
  float s = 0.f;
  if (c < dim) {
    for (int b = threadIdx.y; b < blocks; b += kSumGroups) s += partials[b * dim + c];
  }
  group_sum[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && c < dim) {
    float total = 0.f;
    for (int g = 0; g < kSumGroups; ++g) total += group_sum[g][threadIdx.x];
    dw[c] = total;
  }
}

}  // namespace

void rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps, cudaStream_t stream) {
  const char* name = "rmsnorm_forward";
  require_same_shape(name, out, x);
  require(out.dtype == x.dtype, name, "out and x must share one dtype");
  require(weight.numel() == x.cols && (weight.rows == 1 || weight.contiguous()), name,
          "weight " + shape_str(weight) + " for rows of " + std::to_string(x.cols));
  require(rstd.rows == x.rows && rstd.cols == 1, name, "rstd must be [rows, 1]");
  require_dtype(name, rstd, DType::F32);
  if (x.numel() == 0) return;
  dispatch_pair(x.dtype, weight.dtype, name, [&](auto t, auto w) {
    using T = typename decltype(t)::type;
    using W = typename decltype(w)::type;
    dispatch_vec<T>(row_vec<T, W>({&out, &x}, weight), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const std::int64_t blocks =
          std::min<std::int64_t>((x.rows + kNormWarpsPerBlock - 1) / kNormWarpsPerBlock, 65535);
      launch_kernel(rmsnorm_forward_kernel<T, W, kVec>, static_cast<unsigned>(blocks),
                    kNormWarpsPerBlock * 32, 0, stream, out.ptr<T>(), out.ld, rstd.ptr<float>(),
                    rstd.ld, x.ptr<const T>(), x.ld, weight.ptr<const W>(), x.rows, x.cols,
                    static_cast<float>(eps));
      CUDA_CHECK_LAUNCH();
    });
  });
}

void rmsnorm_apply(Mat out, Mat x, Mat weight, Mat rstd, cudaStream_t stream) {
  const char* name = "rmsnorm_apply";
  require_same_shape(name, out, x);
  require(out.dtype == x.dtype, name, "out and x must share one dtype");
  require(weight.numel() == x.cols && (weight.rows == 1 || weight.contiguous()), name,
          "weight " + shape_str(weight) + " for rows of " + std::to_string(x.cols));
  require(rstd.rows == x.rows && rstd.cols == 1, name, "rstd must be [rows, 1]");
  require_dtype(name, rstd, DType::F32);
  if (x.numel() == 0) return;
  dispatch_pair(x.dtype, weight.dtype, name, [&](auto t, auto w) {
    using T = typename decltype(t)::type;
    using W = typename decltype(w)::type;
    dispatch_vec<T>(row_vec<T, W>({&out, &x}, weight), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const std::int64_t blocks =
          std::min<std::int64_t>((x.rows + kNormWarpsPerBlock - 1) / kNormWarpsPerBlock, 65535);
      launch_kernel(rmsnorm_apply_kernel<T, W, kVec>, static_cast<unsigned>(blocks),
                    kNormWarpsPerBlock * 32, 0, stream, out.ptr<T>(), out.ld,
                    rstd.ptr<const float>(), rstd.ld, x.ptr<const T>(), x.ld, weight.ptr<const W>(),
                    x.rows, x.cols);
      CUDA_CHECK_LAUNCH();
    });
  });
}

namespace {
// Grids of at most this many blocks add their partial rows in the kernel:
// two blocks per SM of an H100, the sizes whose backward is launch-bound.
constexpr std::int64_t kInKernelSumMaxBlocks = 264;

// Each warp's dw slice lives in shared memory: as many warps as 48 KB hold.
int backward_block_warps(std::int64_t dim) {
  return static_cast<int>(std::clamp<std::int64_t>(
      48 * 1024 / (dim * static_cast<std::int64_t>(sizeof(float))), 1, kNormWarpsPerBlock));
}

// A grid of one block per partial row, each taking rows_at_once rows at a
// time: at most as many blocks as there are partial rows in the workspace.
std::int64_t partial_rows_grid(std::int64_t rows, std::int64_t rows_at_once,
                               std::int64_t by_capacity) {
  return std::max<std::int64_t>(
      1, std::min({static_cast<std::int64_t>(kRmsnormPartialRows), by_capacity,
                   (rows + rows_at_once - 1) / rows_at_once}));
}

// The one-warp kernels' grid before the cap at the blocks resident. It also
// decides where the partial rows are added (in the kernel or by a second
// one) whichever kernel runs, so that the plan (workspace_sizes) knows it
// without knowing the dtype.
std::int64_t backward_blocks(std::int64_t rows, std::int64_t dim, std::int64_t by_capacity) {
  return partial_rows_grid(rows, backward_block_warps(dim), by_capacity);
}

// The team kernel for `chunks` vectors a row: warps per team and vectors per
// thread, or {0, 0} where the row is too long for it.
struct TeamShape {
  int warps = 0;
  int chunks = 0;
};
TeamShape team_shape(std::int64_t chunks) {
  if (chunks <= 32 * 4 * 2) return {4, 2};
  if (chunks <= 32 * 8 * 2) return {8, 2};
  if (chunks <= 32 * 8 * 4) return {8, 4};
  return {};
}

// Blocks of `kernel` that the GPU holds at once (block_warps warps, smem
// bytes of shared memory each).
template <typename Kernel>
std::int64_t resident_grid(Kernel kernel, int block_warps, std::size_t smem) {
  return static_cast<std::int64_t>(resident_blocks_per_sm(reinterpret_cast<const void*>(kernel),
                                                          block_warps * 32, smem)) *
         current_device_sm_count();
}

}  // namespace

bool rmsnorm_backward_sums_in_second_kernel(std::int64_t rows, std::int64_t dim,
                                            NormWeightSum sum) {
  return sum == NormWeightSum::SecondKernel ||
         backward_blocks(rows, dim, kRmsnormPartialRows) > kInKernelSumMaxBlocks;
}

namespace {

// The backward's operands fit x's rows, and the workspace holds at least one
// partial row: the partial rows it holds (capacity / dim), 0 when rows are
// empty and there is nothing to do.
std::int64_t check_backward(const char* name, Mat dx, Mat dweight, Mat dout, Mat x, Mat weight,
                            Mat rstd, Mat dresidual, std::int64_t capacity) {
  require_same_shape(name, dx, x);
  require_same_shape(name, dout, x);
  require(dx.dtype == x.dtype && dout.dtype == x.dtype, name,
          "dx, dout and x must share one dtype");
  if (!dresidual.empty()) {
    require_same_shape(name, dresidual, x);
    require(dresidual.dtype == x.dtype, name, "dresidual and x must share one dtype");
  }
  require(weight.numel() == x.cols && (weight.rows == 1 || weight.contiguous()), name,
          "weight " + shape_str(weight) + " for rows of " + std::to_string(x.cols));
  require(dweight.numel() == x.cols && (dweight.rows == 1 || dweight.contiguous()), name,
          "dweight " + shape_str(dweight) + " for rows of " + std::to_string(x.cols));
  require_dtype(name, dweight, DType::F32);
  require_dtype(name, rstd, DType::F32);
  require(rstd.rows == x.rows, name, "rstd must be [rows, 1]");
  const std::int64_t dim = x.cols;
  if (dim == 0) return 0;
  const std::int64_t by_capacity = capacity / dim;
  require(by_capacity >= 1, name,
          "workspace not prepared for rows of " + std::to_string(dim) +
              " (prepare() sizes it from hidden_dim)");
  require(dim <= 12288, name, "rows longer than 12288 are not supported");
  return by_capacity;
}

}  // namespace

void rmsnorm_backward(Mat dx, Mat dweight, Mat dout, Mat x, Mat weight, Mat rstd, Mat dresidual,
                      float* partials, std::int64_t capacity, unsigned* counters,
                      const KernelChoices& kernels, cudaStream_t stream,
                      RmsnormPartialSum* defer_sum) {
  if (defer_sum != nullptr) *defer_sum = RmsnormPartialSum{};
  const char* name = dresidual.empty() ? "rmsnorm_backward" : "rmsnorm_backward_add";
  const std::int64_t by_capacity =
      check_backward(name, dx, dweight, dout, x, weight, rstd, dresidual, capacity);
  if (by_capacity == 0) return;
  const std::int64_t dim = x.cols;
  // Where the partial rows are added follows the one-warp grid whichever
  // kernel runs (backward_blocks).
  const bool in_kernel = counters != nullptr &&
                         kernels.norm_weight_sum == NormWeightSum::InKernelWhereSmall &&
                         backward_blocks(x.rows, dim, by_capacity) <= kInKernelSumMaxBlocks;
  const bool team_rows = kernels.norm_long_rows == NormLongRows::Teams;
  float* dw_in_kernel = in_kernel ? dweight.ptr<float>() : nullptr;
  unsigned* counters_in_kernel = in_kernel ? counters : nullptr;
  std::int64_t blocks = 0;  // the grid that ran: its partial rows
  dispatch_pair(x.dtype, weight.dtype, name, [&](auto t, auto w) {
    using T = typename decltype(t)::type;
    using W = typename decltype(w)::type;
    const int vec = dresidual.empty() ? row_vec<T, W>({&dx, &dout, &x}, weight)
                                      : row_vec<T, W>({&dx, &dout, &x, &dresidual}, weight);
    dispatch_vec<T>(vec, [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const std::int64_t per_lane = (dim / kVec + 31) / 32;
      // One wave of resident blocks at most: a grid-stride loop gives each
      // warp or team more rows instead of a partly filled last wave.
      auto launch = [&](auto kernel, int rows_at_once, int block_warps, std::size_t smem) {
        const std::int64_t grid = std::min(partial_rows_grid(x.rows, rows_at_once, by_capacity),
                                           resident_grid(kernel, block_warps, smem));
        launch_kernel(kernel, dim3(static_cast<unsigned>(grid)),
                      dim3(static_cast<unsigned>(block_warps * 32)), smem, stream, dx.ptr<T>(),
                      dx.ld, partials, dw_in_kernel, counters_in_kernel, dout.ptr<const T>(),
                      dout.ld, dresidual.ptr<const T>(), dresidual.ld, x.ptr<const T>(), x.ld,
                      weight.ptr<const W>(), rstd.ptr<const float>(), rstd.ld, x.rows, dim);
        blocks = grid;
      };
      // The in-kernel sum reuses the shared memory for its ticket and group
      // sums.
      auto smem_for = [&](int sum_rows) {
        return std::max<std::size_t>(static_cast<std::size_t>(sum_rows) * dim * sizeof(float),
                                     in_kernel ? kSumGroups * 32 * sizeof(float) : 0);
      };
      const TeamShape team = team_shape(dim / kVec);
      if (dim % kVec == 0 && per_lane > 4 && team.warps > 0 && team_rows) {
        const int teams = kNormWarpsPerBlock / team.warps;
        const std::size_t smem = smem_for(teams);
        auto launch_team = [&](auto kernel) { launch(kernel, teams, kNormWarpsPerBlock, smem); };
        if (team.warps == 4) {
          launch_team(norm_team::rmsnorm_backward_team_kernel<T, W, kVec, 2, 4>);
        } else if (team.chunks == 2) {
          launch_team(norm_team::rmsnorm_backward_team_kernel<T, W, kVec, 2, 8>);
        } else {
          launch_team(norm_team::rmsnorm_backward_team_kernel<T, W, kVec, 4, 8>);
        }
        CUDA_CHECK_LAUNCH();
        return;
      }
      const int block_warps = backward_block_warps(dim);
      const std::size_t smem = smem_for(block_warps);
      auto launch_one_warp = [&](auto kernel) { launch(kernel, block_warps, block_warps, smem); };
      if (dim % kVec != 0 || per_lane > 4) {
        launch_one_warp(rmsnorm_backward_kernel<T, W, kVec>);
      } else if (per_lane == 1) {
        launch_one_warp(norm_team::rmsnorm_backward_warp_kernel<T, W, kVec, 1>);
      } else if (per_lane == 2) {
        launch_one_warp(norm_team::rmsnorm_backward_warp_kernel<T, W, kVec, 2>);
      } else {
        launch_one_warp(norm_team::rmsnorm_backward_warp_kernel<T, W, kVec, 4>);
      }
      CUDA_CHECK_LAUNCH();
    });
  });
  if (in_kernel) return;
  const RmsnormPartialSum sum{dweight.ptr<float>(), partials, static_cast<int>(blocks), dim};
  if (defer_sum != nullptr) {
    *defer_sum = sum;
    return;
  }
  rmsnorm_sum_partials(sum, stream);
}

void rmsnorm_sum_partials(const RmsnormPartialSum& sum, cudaStream_t stream) {
  if (sum.blocks == 0) return;
  launch_kernel(sum_partials_kernel, static_cast<unsigned>((sum.dim + 31) / 32),
                dim3(32, kSumGroups), 0, stream, sum.dweight, sum.partials, sum.blocks, sum.dim);
  CUDA_CHECK_LAUNCH();
}

}  // namespace tinyllama::cuda
