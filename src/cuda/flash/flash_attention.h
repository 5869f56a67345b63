#pragma once
// Causal GQA flash attention (level v2) behind the Backend contract with an
// empty probs Mat: no S x S buffer, the backward recomputes P from lse.
// head_dim 32, 64, 96 or 128; any seq >= 1. Implemented in dispatch.cu.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/mat.h"
#include "model/backend.h"

namespace tinyllama::cuda {

// The backward's scratch: D = rowsum(dO * O), fp32, one per query row
// (written by the dQ kernels, or by the delta kernel: FlashDelta); and
// where the fused kernel is pinned when the scratch is sized (Hopper,
// head_dim 64 / 128), its dQ accumulator (fp32, B * H * S * head_dim) and
// order counters (one per 64 query rows of each (batch, head)); null
// elsewhere.
struct FlashScratch {
  float* delta = nullptr;
  std::int64_t rows = 0;  // capacity: B * H * S
  float* dq_acc = nullptr;
  int* dq_counters = nullptr;
  std::int64_t dq_acc_elems = 0;
  std::int64_t counters = 0;
};
// The head_dims the flash kernels are instantiated for (DeviceCaps reads it).
inline constexpr int kFlashHeadDims[] = {32, 64, 96, 128};
// RopeImpl::Fused's angles: (cos, sin) of position p's angle for pair i at
// cos_sin[2 (p * head_dim / 2 + i)], fp32, for positions [0, seq); built by
// rope_table() (cuda_ops.h) from the same double-precision angles as the
// rope kernel.
struct RopeTable {
  float* cos_sin = nullptr;
  int seq = 0;
  int head_dim = 0;
  double theta = 0;
};
std::int64_t flash_attention_scratch_bytes(const AttentionShape& s);
FlashScratch flash_attention_scratch(void* base, const AttentionShape& s);
// The forward's kernel families (bf16 / fp16). Best: the Hopper kernel
// (wgmma, forward_wgmma.cu) where the device is sm_90, the build has sm_90a
// code, the head dim is 64 or 128 and rows allow 16-byte accesses, else the
// Ampere-style one (mma.sync, forward_tc.cu). The others pin one family
// (a pinned Hopper kernel still falls back where it cannot run), so the
// kernel bench and the tests can set them side by side; the model never
// pins. Process-wide, read at each call.
// WgmmaWxK: W warpgroups (64 query rows each) per block, K keys per tile;
// PairedWxK: the W warpgroups take the same rows of W heads of one kv
// group (others fall back to Wgmma2x64 when the group is odd); OverlapWxK:
// the softmax overlapped with P V; SpecializedK: a TMA producer warpgroup
// and two wgmma consumers, K keys per tile; PingPongK: the consumers take
// turns at the tensor cores.
enum class FlashForwardKernel {
  Best,
  Mma,
  Wgmma1x64,
  Wgmma1x128,
  Wgmma2x64,
  Wgmma2x128,
  Paired2x64,
  Paired2x128,
  Overlap1x64,
  Overlap2x64,
  Overlap2x128,
  Specialized64,
  Specialized128,
  PingPong64,
  PingPong128
};
void set_flash_forward_kernel(FlashForwardKernel k);
FlashForwardKernel flash_forward_kernel();
// The backward's: Best is the Hopper kernels where the forward's could run
// (the warp-specialised dK/dV at hd 128, backward_wgmma.cu's at hd 64),
// else mma.sync.
// Specialized: the dK/dV kernel warp-specialised (TMA producer, two wgmma
// consumers), the dQ kernel as in Wgmma. Fused: one warp-specialised
// kernel for dK, dV and dQ (five products per tile pair, not seven), dQ
// summed across key blocks in a fixed order, after the delta kernel, and a
// conversion kernel; pin it before prepare(), which then plans its dQ
// accumulator (a call without one throws). OneLaunch: Wgmma's two kernels
// as one grid, side by side (the dK/dV blocks compute D themselves); Best
// takes it where two launches cannot fill the GPU (dispatch.cu says where).
enum class FlashBackwardKernel { Best, Mma, Wgmma, Specialized, Fused, OneLaunch };
void set_flash_backward_kernel(FlashBackwardKernel k);
// Where the backward computes D = rowsum(dO * O): InDq (the default) in the
// dQ kernel's prologue, for its own query tile, with dQ launched before
// dK/dV (two launches); Separate: a kernel of its own before them (three).
// The same bits either way; pinned like the kernels, for the kernel bench
// and the tests. Process-wide, read at each call.
enum class FlashDelta { InDq, Separate };
void set_flash_backward_delta(FlashDelta where);
FlashDelta flash_backward_delta();
// Whether this build and the current device can run the Hopper kernels.
bool flash_hopper_kernels_available();

// RopeImpl::Fused's forward (rope_tiles.cuh): q and k come as the QKV GEMM
// wrote them; the kernels rotate their tiles as they load them, attend over
// the rotated q and k, and write q_rot, k_rot (rotated) and v_copy (v's
// copy) where the backward reads them: the bits of rope_forward on a copy
// of q and k, then attention. Every forward kernel family does it.
struct FlashRopeForward {
  const RopeTable* table = nullptr;
  Mat q_rot, k_rot, v_copy;
};
void flash_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v, const AttentionShape& shape,
                             cudaStream_t stream, const FlashRopeForward* rope = nullptr);
// rope: nullptr, or the table whose inverse rotation dQ and dK get before
// they are rounded and stored (RopeImpl::Fused): the result of
// rope_backward on them, rounded once. Every backward kernel family does it.
void flash_attention_backward(const FlashScratch& scratch, Mat dq, Mat dk, Mat dv, Mat dout, Mat q,
                              Mat k, Mat v, Mat out, Mat lse, const AttentionShape& shape,
                              cudaStream_t stream, const RopeTable* rope = nullptr);

}  // namespace tinyllama::cuda
