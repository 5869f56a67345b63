#pragma once
// How dispatch.cu reaches kernels that live in other translation units: one
// host launcher per kernel family, each defined and explicitly instantiated
// beside its kernels (T: the element types it serves, HD: 32, 64, 96, 128;
// the Hopper families 64 and 128 only), and the helpers the launchers share
// (grid arithmetic, the launch with its error check; the dynamic shared
// memory opt-in is cuda_launch.cuh's).
// Kernels themselves stay in unnamed namespaces: nothing outside their file
// names them.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/mat.h"
#include "device/cuda_check.h"
#include "device/cuda_launch.cuh"
#include "ops/attention/flash/params.h"

namespace tinyllama::cuda::flash {

// forward_tc.cu, T = __nv_bfloat16 or __half.
template <typename T, int HD>
void launch_forward_tc(const FwdArgs& args, const FlashDims& d, cudaStream_t stream);
// forward_wgmma.cu (sm_90a), T = __nv_bfloat16 or __half, HD 64 or 128, BK
// (keys per tile) 64 or 128, WGS (warpgroups of 64 query rows per block) 1
// or 2; PAIR (WGS 2 only; the group a multiple of 2): the warpgroups take
// the same rows of two heads of one kv group. Rows must allow 16-byte
// accesses.
template <typename T, int HD, int BK, int WGS, bool PAIR>
void launch_forward_wgmma(const FwdArgs& args, const FlashDims& d, cudaStream_t stream);
// forward_wgmma_overlap.cu: the same with the softmax overlapped with P V;
// (BK, WGS) = (64, 1), (64, 2) or (128, 2).
template <typename T, int HD, int BK, int WGS>
void launch_forward_wgmma_overlap(const FwdArgs& args, const FlashDims& d, cudaStream_t stream);
// forward_ws.cu: warp-specialised (a TMA producer, two wgmma consumers),
// BK 64 or 128, STAGES 2, PINGPONG (the consumers take turns); q, k, v: the
// operands (for their tensor maps).
template <typename T, int HD, int BK, int STAGES, bool PINGPONG>
void launch_forward_ws(const FwdArgs& args, const Mat& q, const Mat& k, const Mat& v,
                       const FlashDims& d, cudaStream_t stream);
// The backward launchers run dQ, then dK/dV: with BwdArgs::dq_writes_delta
// the dQ kernel's prologue writes the D that dK/dV reads.
// backward_tc.cu, T = __nv_bfloat16 or __half.
template <typename T, int HD>
void launch_backward_tc(const BwdArgs& args, const FlashDims& d, cudaStream_t stream);
// backward_wgmma.cu (sm_90a), T = __nv_bfloat16 or __half, HD 64 or 128:
// rows must allow 16-byte accesses.
template <typename T, int HD>
void launch_backward_wgmma(const BwdArgs& args, const FlashDims& d, cudaStream_t stream);
// Its dQ kernel alone.
template <typename T, int HD>
void launch_backward_dq_wgmma(const BwdArgs& args, const FlashDims& d, cudaStream_t stream);
// backward_one_launch.cu: the two kernels above as one grid, the dK/dV
// blocks computing D themselves (no order between the roles).
template <typename T, int HD>
void launch_backward_one_launch(const BwdArgs& args, const FlashDims& d, cudaStream_t stream);
// backward_ws.cu: the dQ kernel above, then dK/dV warp-specialised (a TMA
// producer streams Q and dO, two wgmma consumers own 64 keys each);
// q, k, v, dout: the operands (for their tensor maps).
template <typename T, int HD>
void launch_backward_ws(const BwdArgs& args, const Mat& q, const Mat& k, const Mat& v,
                        const Mat& dout, const FlashDims& d, cudaStream_t stream);
// backward_fused.cu: dK, dV and dQ in one warp-specialised kernel, dQ
// summed across blocks in a fixed order (dq_ordered.cuh) in
// args.dq_acc / args.dq_counters; D and zeroed counters must come from
// launch_delta just before it.
template <typename T, int HD>
void launch_backward_fused(const BwdArgs& args, const Mat& q, const Mat& k, const Mat& v,
                           const Mat& dout, const FlashDims& d, cudaStream_t stream);
// fp32.cu.
template <int HD>
void launch_forward_fp32(const FwdArgs& args, const FlashDims& d, cudaStream_t stream);
template <int HD>
void launch_backward_fp32(const BwdArgs& args, const FlashDims& d, cudaStream_t stream);
// delta.cu, T = float, __nv_bfloat16 or __half: D = rowsum(dO * O) into
// delta ([B*H, S], rows = B*H*S) as a kernel of its own (FlashDelta::
// Separate); vec: every row of dout and out allows 16-byte loads.
// counters: n_counters ints the kernel zeroes (the fused backward's dQ
// order counters), or nullptr.
template <typename T, int HD>
void launch_delta(float* delta, const Mat& dout, const Mat& out, bool vec, const FlashDims& d,
                  std::int64_t rows, cudaStream_t stream, int* counters = nullptr,
                  std::int64_t n_counters = 0);

template <auto Kernel, typename Args>
void launch(dim3 grid, std::size_t smem, const Args& args, cudaStream_t stream) {
  allow_smem<Kernel>(smem);
  launch_kernel(Kernel, grid, kFlashThreads, smem, stream, args);
  CUDA_CHECK_LAUNCH();
}

inline unsigned tiles(int seq, int tile) {
  return static_cast<unsigned>((seq + tile - 1) / tile);
}

}  // namespace tinyllama::cuda::flash
