#pragma once
// Hopper's warpgroup MMA (wgmma) for the tensor-core kernels: the shared-memory
// matrix descriptors of 128-byte-swizzled tiles, the fences and group
// commits that order the asynchronous MMAs, and the m64nNk16 instructions
// with fp32 accumulators (A from shared memory or from registers, B from
// shared memory). Only an sm_90a build has them; kernels built on them
// guard their bodies with TINYLLAMA_WGMMA_AVAILABLE.
//
// The swizzled layout (the one the descriptors below describe): a tile of
// ROWS rows and 64 16-bit columns is ROWS rows of 128 bytes, and the 16-byte
// chunk c of row r sits at chunk position c ^ (r % 8); a wider tile is
// several such 64-column blocks one after another. Eight consecutive rows
// (1024 bytes) form one swizzle atom, so tiles start 1024-byte aligned.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "device/arch/ptx.cuh"
#include "device/arch/wgmma_ops.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TINYLLAMA_WGMMA_AVAILABLE 1
#endif

namespace tinyllama::cuda::arch {

constexpr int kSwizzleRowBytes = 128;  // one row of a 64-column block
constexpr int kSwizzleAtomBytes = 1024;

// Byte offset of 16-byte chunk `chunk` (0..HD/8) of row `row` in a
// swizzled tile of `rows` rows.
__device__ __forceinline__ int sw128_offset(int rows, int row, int chunk) {
  return (chunk >> 3) * rows * kSwizzleRowBytes + row * kSwizzleRowBytes +
         (((chunk & 7) ^ (row & 7)) << 4);
}

// A wgmma shared-memory descriptor with 128-byte swizzling. addr: the
// shared-window address of the first element; lbo / sbo: the leading and
// stride byte offsets (K-major: sbo steps 8 rows, lbo is unused; MN-major:
// lbo steps a 64-column block, sbo steps 8 rows of K).
__device__ __forceinline__ std::uint64_t sw128_desc(unsigned addr, unsigned lbo, unsigned sbo) {
  std::uint64_t d = (addr & 0x3FFFFu) >> 4;
  d |= static_cast<std::uint64_t>((lbo & 0x3FFFFu) >> 4) << 16;
  d |= static_cast<std::uint64_t>((sbo & 0x3FFFFu) >> 4) << 32;
  d |= 1ull << 62;  // 128-byte swizzle
  return d;
}

#if defined(TINYLLAMA_WGMMA_AVAILABLE)
// Before the first wgmma of a batch: registers it reads or accumulates into
// were written by ordinary instructions.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most N committed groups of this warpgroup are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Shared memory written through the generic proxy (stores, cp.async) is
// visible to wgmma (the async proxy) only after this fence.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
#endif

// Keeps the compiler from moving reads or writes of accumulators across a
// wgmma_wait: the asynchronous MMA owns them until then.
__device__ __forceinline__ void fence_reg(float& x) {
  asm volatile("" : "+f"(x)::"memory");
}
__device__ __forceinline__ void fence_reg(unsigned& x) {
  asm volatile("" : "+r"(x)::"memory");
}
template <typename E, int R, int C>
__device__ __forceinline__ void fence_regs(E (&x)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; ++i) {
#pragma unroll
    for (int j = 0; j < C; ++j) fence_reg(x[i][j]);
  }
}

// d (+)= A B for a 64 x 16 A and a 16 x N B, both in shared memory
// (descriptors); TA / TB: 1 when that operand is MN-major (transposed).
// scale_d 0 ignores d's old values (the first product of a sum).
template <typename T, int N, int TA, int TB>
__device__ __forceinline__ void wgmma_ss(float (&d)[N / 8][4], std::uint64_t desc_a,
                                         std::uint64_t desc_b, int scale_d) {
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  if constexpr (std::is_same_v<T, __nv_bfloat16> && N == 64) {
    wgmma_ss_bf16_n64<TA, TB>(d, desc_a, desc_b, scale_d);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16> && N == 128) {
    wgmma_ss_bf16_n128<TA, TB>(d, desc_a, desc_b, scale_d);
  } else if constexpr (std::is_same_v<T, __half> && N == 64) {
    wgmma_ss_f16_n64<TA, TB>(d, desc_a, desc_b, scale_d);
  } else {
    static_assert(std::is_same_v<T, __half> && N == 128, "wgmma_ss: bf16/fp16, N 64 or 128");
    wgmma_ss_f16_n128<TA, TB>(d, desc_a, desc_b, scale_d);
  }
#endif
}

// d (+)= A B with A (64 x 16) in registers, in the mma.sync m16n8k16 A
// fragment layout per warp (warp w holds rows 16w..16w+15).
template <typename T, int N, int TB>
__device__ __forceinline__ void wgmma_rs(float (&d)[N / 8][4], const unsigned (&a)[4],
                                         std::uint64_t desc_b, int scale_d) {
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  if constexpr (std::is_same_v<T, __nv_bfloat16> && N == 64) {
    wgmma_rs_bf16_n64<TB>(d, a, desc_b, scale_d);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16> && N == 128) {
    wgmma_rs_bf16_n128<TB>(d, a, desc_b, scale_d);
  } else if constexpr (std::is_same_v<T, __half> && N == 64) {
    wgmma_rs_f16_n64<TB>(d, a, desc_b, scale_d);
  } else {
    static_assert(std::is_same_v<T, __half> && N == 128, "wgmma_rs: bf16/fp16, N 64 or 128");
    wgmma_rs_f16_n128<TB>(d, a, desc_b, scale_d);
  }
#endif
}

}  // namespace tinyllama::cuda::arch
