#pragma once
// Hopper's bulk asynchronous copies between shared and global memory
// (cp.async.bulk, not the tensor form: a contiguous run of bytes), their
// groups, and the proxy fence that orders them with ordinary global
// accesses. Device side only; nothing here knows about attention or GEMMs.
#include "device/arch/ptx.cuh"
#include "device/arch/wgmma.cuh"

namespace tinyllama::cuda::arch {

// For one thread: a plain copy, and a copy that adds into global memory
// (each element once, in L2), grouped per thread.
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
__device__ __forceinline__ void bulk_store(float* dst, const float* src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst),
               "r"(smem_u32(src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void bulk_add(float* dst, const float* src, unsigned bytes) {
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
      "r"(smem_u32(src)), "r"(bytes)
      : "memory");
}
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// At most N of this thread's groups still reading shared memory.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// At most N of this thread's groups not yet complete (written).
template <int N>
__device__ __forceinline__ void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
// Orders this thread's generic and async-proxy accesses to global memory.
__device__ __forceinline__ void fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
#endif

}  // namespace tinyllama::cuda::arch
