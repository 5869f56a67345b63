// Token embedding lookup, and the scan form of its gradient
// (EmbeddingGradImpl::Scan; the sorted form is cuda_embedding_sorted.cu).
// The scan is deterministic without sorting: the block of a token's FIRST
// occurrence owns that table row and adds every occurrence's gradient in
// position order, so the sum is bit-reproducible. Its cost follows the token
// distribution: one block adds all the rows of its token, so a frequent
// token (a space in byte-level text: a sixth of the positions) serialises
// the whole gradient on one block.
#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "device/cuda_vec.cuh"
#include "ops/embedding/cuda_embedding.h"

namespace tinyllama::cuda {
namespace {

// The rows x (dim / Vec) index space as the elementwise kernels walk it
// (row_launch: a block spans a row's chunks, a grid-stride loop the rows),
// 16 bytes a thread where the views allow: each thread reads its row's
// token once per row and copies Vec elements. One element a thread over a
// 65 535-block grid, with a 64-bit division each, took 81 us at the
// workshop's B32 S1024; this takes 14 (H200, issue 44's counter runs,
// docs/log/2026-11-29.md).
template <typename T, int Vec>
__global__ void embedding_forward_kernel(T* __restrict__ out, std::int64_t ld_out,
                                         const std::int32_t* __restrict__ tokens,
                                         const T* __restrict__ table, std::int64_t ld_table,
                                         std::int64_t vocab, std::int64_t rows,
                                         std::int64_t chunks) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t chunk = my_chunk();
  if (chunk >= chunks) return;
  const std::int64_t c = chunk * Vec;
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    const std::int32_t t = tokens[r];
    float v[Vec];
    if (t >= 0 && t < vocab) {
      load_f32<Vec>(table + t * ld_table + c, v);
    } else {
      // An out-of-range id must not read foreign memory; NaN makes it visible.
#pragma unroll
      for (int k = 0; k < Vec; ++k) v[k] = NAN;
    }
    store_f32<Vec>(out + r * ld_out + c, v);
  }
}

constexpr int kBackwardThreads = 256;

// One block per position i. Blocks whose token appeared earlier exit; the
// first occurrence walks the positions j >= i in chunks of blockDim, compacts
// the matching ones into shared memory in order, and adds their rows.
template <typename T>
__global__ void __launch_bounds__(kBackwardThreads)
    embedding_backward_kernel(float* __restrict__ dtable, std::int64_t ld_table, std::int64_t vocab,
                              const std::int32_t* __restrict__ tokens, const T* __restrict__ dout,
                              std::int64_t ld_out, std::int64_t n, std::int64_t dim) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  __shared__ int warp_count[kBackwardThreads / 32];
  __shared__ int warp_offset[kBackwardThreads / 32 + 1];
  __shared__ std::int64_t match[kBackwardThreads];

  const std::int64_t i = blockIdx.x;
  const std::int32_t t = tokens[i];
  if (t < 0 || t >= vocab) return;  // uniform across the block

  // Look back a chunk at a time, nearest first, and stop at the first chunk
  // holding t: a repeated token finds its previous occurrence after about
  // vocab / blockDim chunks, so only first occurrences scan the whole prefix.
  bool seen_before = false;
  for (std::int64_t end = i; end > 0 && !seen_before; end -= blockDim.x) {
    const std::int64_t j = end - 1 - threadIdx.x;
    seen_before = __syncthreads_or(j >= 0 && tokens[j] == t) != 0;
  }
  if (seen_before) return;

  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  float* row = dtable + t * ld_table;
  for (std::int64_t base = i; base < n; base += blockDim.x) {
    const std::int64_t j = base + threadIdx.x;
    const bool hit = j < n && tokens[j] == t;
    const unsigned mask = __ballot_sync(0xffffffffu, hit);
    if (lane == 0) warp_count[warp] = __popc(mask);
    __syncthreads();
    if (threadIdx.x == 0) {
      warp_offset[0] = 0;
      for (int w = 0; w < warps; ++w) warp_offset[w + 1] = warp_offset[w] + warp_count[w];
    }
    __syncthreads();
    if (hit) match[warp_offset[warp] + __popc(mask & ((1u << lane) - 1u))] = j;
    __syncthreads();
    const int hits = warp_offset[warps];
    if (hits > 0) {
      for (std::int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
        float acc = row[c];
        for (int h = 0; h < hits; ++h) acc += to_f32(dout[match[h] * ld_out + c]);
        row[c] = acc;
      }
    }
    __syncthreads();  // match[] is rewritten by the next chunk
  }
}

}  // namespace

void embedding_forward(Mat out, const std::int32_t* tokens, Mat table, cudaStream_t stream) {
  const char* name = "embedding_forward";
  require(out.cols == table.cols, name, "out " + shape_str(out) + " vs table " + shape_str(table));
  require(out.dtype == table.dtype, name, "out and table must share one dtype");
  if (out.numel() == 0) return;
  dispatch_float(out.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_vec<T>(vec_width<T>({&out, &table}), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const RowLaunch l = row_launch(out.rows, out.cols / kVec);
      launch_kernel(embedding_forward_kernel<T, kVec>, l.grid, l.block, 0, stream, out.ptr<T>(),
                    out.ld, tokens, table.ptr<const T>(), table.ld, table.rows, out.rows,
                    out.cols / kVec);
      CUDA_CHECK_LAUNCH();
    });
  });
}

bool embedding_grad_has_work(const char* name, Mat dtable, Mat dout) {
  require(dtable.cols == dout.cols, name,
          "dtable " + shape_str(dtable) + " vs dout " + shape_str(dout));
  require_dtype(name, dtable, DType::F32);
  return dout.rows > 0 && dout.cols > 0;
}

void embedding_backward_scan(Mat dtable, const std::int32_t* tokens, Mat dout,
                             cudaStream_t stream) {
  const char* name = "embedding_backward (scan)";
  if (!embedding_grad_has_work(name, dtable, dout)) return;
  require(dout.rows <= 2147483647, name, "too many positions");
  dispatch_float(dout.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(embedding_backward_kernel<T>, static_cast<unsigned>(dout.rows), kBackwardThreads,
                  0, stream, dtable.ptr<float>(), dtable.ld, dtable.rows, tokens,
                  dout.ptr<const T>(), dout.ld, dout.rows, dout.cols);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tinyllama::cuda
