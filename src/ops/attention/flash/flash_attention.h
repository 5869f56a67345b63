#pragma once
// Causal GQA flash attention (level v2) behind the Backend contract with an
// empty probs Mat: no S x S buffer, the backward recomputes P from lse.
// head_dim 32, 64, 96 or 128; any seq >= 1. Implemented in dispatch.cu.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/mat.h"
#include "model/backend.h"
#include "model/kernel_choices.h"

namespace tinyllama::cuda {

// The backward's scratch: D = rowsum(dO * O), fp32, one per query row
// (written by the dQ kernels, or by the delta kernel: FlashDelta); and
// where the plan runs the fused kernel (Hopper, head_dim 64 / 128), its dQ
// accumulator (fp32, B * H * S * head_dim) and order counters (one per 64
// query rows of each (batch, head)); null elsewhere.
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
// rope_table() (ops/rope/cuda_rope.h) from the same double-precision angles as the
// rope kernel.
struct RopeTable {
  float* cos_sin = nullptr;
  int seq = 0;
  int head_dim = 0;
  double theta = 0;
};
// The scratch the backward needs at shape s with the plan's kernels (the
// fused backward's dQ accumulator only where it runs).
std::int64_t flash_attention_scratch_bytes(const AttentionShape& s, const KernelChoices& kernels);
FlashScratch flash_attention_scratch(void* base, const AttentionShape& s,
                                     const KernelChoices& kernels);
// The kernel families are the plan's (model/kernel_choices.h:
// KernelChoices, decided by resolve_kernels from the device's facts and the
// shapes): the calls below run the families they are given. A Hopper family
// runs where the operands allow 16-byte accesses and falls back to the
// mma.sync kernel where they do not (a Mat the model never hands over);
// a Hopper family on a device without the Hopper kernels is refused.

// Whether this build and the current device can run the Hopper kernels
// (flash attention's and the SwiGLU GEMM's), and why not in one line ("" when
// they can): the device fact DeviceCaps::no_hopper_kernels.
bool flash_hopper_kernels_available();
std::string hopper_kernels_missing();

// RopeImpl::Fused's forward (rope_tiles.cuh): q and k come as the QKV GEMM
// wrote them; the kernels rotate their tiles as they load them, attend over
// the rotated q and k, and write q_rot, k_rot (rotated) and v_copy (v's
// copy) where the backward reads them: the bits of rope_forward on a copy
// of q and k, then attention. Every forward kernel family does it.
struct FlashRopeForward {
  const RopeTable* table = nullptr;
  Mat q_rot, k_rot, v_copy;
};
void flash_attention_forward(const KernelChoices& kernels, Mat out, Mat lse, Mat q, Mat k, Mat v,
                             const AttentionShape& shape, cudaStream_t stream,
                             const FlashRopeForward* rope = nullptr);
// rope: nullptr, or the table whose inverse rotation dQ and dK get before
// they are rounded and stored (RopeImpl::Fused): the result of
// rope_backward on them, rounded once. Every backward kernel family does it.
void flash_attention_backward(const KernelChoices& kernels, const FlashScratch& scratch, Mat dq,
                              Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v, Mat out, Mat lse,
                              const AttentionShape& shape, cudaStream_t stream,
                              const RopeTable* rope = nullptr);

}  // namespace tinyllama::cuda
