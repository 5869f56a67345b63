#pragma once
// Vectorised access for the memory-bound kernels. A 2-byte scalar load per
// thread reaches a fraction of HBM bandwidth; 16-byte loads (8 bf16 or 4
// fp32 per thread) are what the elementwise, RoPE and RMSNorm kernels need
// to run near the roof. Views are only read in vectors when every row start
// is aligned for them, so odd widths and column slices fall back to width 1.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "device/cuda_common.cuh"

namespace tinyllama::cuda {

// The widest vector for T: 16 bytes.
template <typename T>
constexpr int kMaxVec = 16 / static_cast<int>(sizeof(T));

// Unsigned type of exactly `Bytes` bytes, moved as one load or store.
template <int Bytes>
struct RawWord;
template <>
struct RawWord<2> {
  using type = unsigned short;
};
template <>
struct RawWord<4> {
  using type = unsigned int;
};
template <>
struct RawWord<8> {
  using type = uint2;
};
template <>
struct RawWord<16> {
  using type = uint4;
};

template <typename T, int Vec>
union Pack {
  typename RawWord<static_cast<int>(sizeof(T)) * Vec>::type raw;
  T v[Vec];
};

// Vec elements from p, as fp32, in loads of at most 16 bytes each; p must be
// aligned to min(Vec elements, 16 bytes) (the host checked it: vec_width,
// aligned_for).
template <int Vec, typename T>
__device__ __forceinline__ void load_f32(const T* p, float (&out)[Vec]) {
  constexpr int kPer = Vec < kMaxVec<T> ? Vec : kMaxVec<T>;
#pragma unroll
  for (int i = 0; i < Vec; i += kPer) {
    Pack<T, kPer> pk;
    pk.raw = *reinterpret_cast<const decltype(pk.raw)*>(p + i);
#pragma unroll
    for (int k = 0; k < kPer; ++k) out[i + k] = to_f32(pk.v[k]);
  }
}

template <int Vec, typename T>
__device__ __forceinline__ void store_f32(T* p, const float (&in)[Vec]) {
  constexpr int kPer = Vec < kMaxVec<T> ? Vec : kMaxVec<T>;
#pragma unroll
  for (int i = 0; i < Vec; i += kPer) {
    Pack<T, kPer> pk;
#pragma unroll
    for (int k = 0; k < kPer; ++k) pk.v[k] = from_f32<T>(in[i + k]);
    *reinterpret_cast<decltype(pk.raw)*>(p + i) = pk.raw;
  }
}

// Whether a pointer to U may be read Vec elements at a time by load_f32.
template <typename U>
bool aligned_for(const void* p, int vec) {
  const std::size_t bytes = std::min<std::size_t>(16, vec * sizeof(U));
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// The vector width (kMaxVec<T> or 1) that every view in `mats` allows:
// cols and row stride multiples of it, base pointer aligned to it.
template <typename T>
int vec_width(std::initializer_list<const Mat*> mats) {
  constexpr int wide = kMaxVec<T>;
  for (const Mat* m : mats) {
    const auto addr = reinterpret_cast<std::uintptr_t>(m->data);
    if (m->cols % wide != 0 || m->ld % wide != 0 || addr % (wide * sizeof(T)) != 0) return 1;
  }
  return wide;
}

// Calls fn(std::integral_constant<int, V>{}) with V = kMaxVec<T> when
// vec == kMaxVec<T>, else V = 1: two instantiations per kernel, not four.
template <typename T, typename Fn>
void dispatch_vec(int vec, Fn&& fn) {
  if (vec == kMaxVec<T>) {
    fn(std::integral_constant<int, kMaxVec<T>>{});
  } else {
    fn(std::integral_constant<int, 1>{});
  }
}

// Launch shape for kernels that walk [rows, chunks] (chunks = cols / Vec):
// threadIdx.x over chunks, threadIdx.y over rows, so that narrow rows still
// fill a 256-thread block, and a grid-stride loop over rows.
struct RowLaunch {
  dim3 grid;
  dim3 block;
};

inline RowLaunch row_launch(std::int64_t rows, std::int64_t chunks) {
  int tx = 32;
  while (tx < kThreads && tx < chunks) tx *= 2;
  const int ty = kThreads / tx;
  const std::int64_t gx = (chunks + tx - 1) / tx;
  std::int64_t gy = (rows + ty - 1) / ty;
  // Enough blocks for several waves; the rest is the row loop's job.
  const std::int64_t max_gy = std::max<std::int64_t>(1, 8192 / std::max<std::int64_t>(gx, 1));
  gy = std::max<std::int64_t>(1, std::min(gy, std::min<std::int64_t>(max_gy, 65535)));
  return RowLaunch{dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)),
                   dim3(static_cast<unsigned>(tx), static_cast<unsigned>(ty))};
}

// The row of the first iteration and the stride between rows, for a
// RowLaunch-shaped grid.
__device__ __forceinline__ std::int64_t first_row() {
  return static_cast<std::int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
}
__device__ __forceinline__ std::int64_t row_stride() {
  return static_cast<std::int64_t>(gridDim.y) * blockDim.y;
}
__device__ __forceinline__ std::int64_t my_chunk() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

}  // namespace tinyllama::cuda
