// Rotary position embedding on interleaved pairs, in place, and the table
// of (cos, sin) pairs that RopeImpl::Fused's flash backward reads. The angle
// p * theta^(-2i/hd) reaches ~1e3 rad at long sequences, where fp32 keeps
// only ~1e-4 rad of it; so the frequencies are computed on the host in
// double, the angle is formed and reduced modulo 2*pi in double, and only the
// reduced angle goes through fp32 sin/cos.
#include <cmath>

#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "device/cuda_vec.cuh"
#include "ops/rope/cuda_rope.h"
#include "ops/rope/rope_math.cuh"

namespace tinyllama::cuda {
namespace {

constexpr int kMaxHalfHeadDim = 256;  // head_dim up to 512

struct Frequencies {
  double inv[kMaxHalfHeadDim];
};

// sin and cos of pos * inv: the angle formed and reduced in double, only
// the reduced angle through fp32 (rope() and rope_table() share it).
__device__ __forceinline__ void angle_sincos(double pos, double inv, float* s, float* c) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  constexpr double kInvTwoPi = 1.0 / kTwoPi;
  const double angle = pos * inv;
  sincosf(static_cast<float>(angle - kTwoPi * rint(angle * kInvTwoPi)), s, c);
}

// Each thread rotates Vec / 2 consecutive pairs of one row. The frequencies
// go to shared memory first: read from the kernel parameter with a
// per-lane index, they would serialise on the constant cache.
template <typename T, int Vec>
__global__ void rope_kernel(T* x, std::int64_t ld, std::int64_t rows, std::int64_t chunks, int seq,
                            int half_hd, const Frequencies freq, float sign) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  static_assert(Vec % 2 == 0, "a thread owns whole pairs");
  __shared__ double inv[kMaxHalfHeadDim];
  const int tid = threadIdx.y * blockDim.x + threadIdx.x;
  for (int k = tid; k < half_hd; k += blockDim.x * blockDim.y) inv[k] = freq.inv[k];
  __syncthreads();
  const std::int64_t chunk = my_chunk();
  if (chunk >= chunks) return;
  const std::int64_t c = chunk * Vec;
  const int k0 = static_cast<int>((c / 2) % half_hd);  // first pair's index inside its head
  for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
    const double pos = static_cast<double>(r % seq);
    T* p = x + r * ld + c;
    float v[Vec];
    load_f32<Vec>(p, v);
    int k = k0;
#pragma unroll
    for (int j = 0; j < Vec; j += 2) {
      float s, co;
      angle_sincos(pos, inv[k], &s, &co);
      s *= sign;  // the inverse rotation is the rotation by -angle
      rope_rotate(v[j], v[j + 1], co, s);
      k = (k + 1 == half_hd) ? 0 : k + 1;
    }
    store_f32<Vec>(p, v);
  }
}

// One thread per (position, pair): cos_sin[2e], cos_sin[2e + 1] = cos, sin
// of entry e = position * half_hd + pair.
__global__ void rope_table_kernel(float2* cos_sin, std::int64_t entries, int half_hd,
                                  const Frequencies freq) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  __shared__ double inv[kMaxHalfHeadDim];
  for (int k = static_cast<int>(threadIdx.x); k < half_hd; k += static_cast<int>(blockDim.x)) {
    inv[k] = freq.inv[k];
  }
  __syncthreads();
  const std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= entries) return;
  float s, c;
  angle_sincos(static_cast<double>(e / half_hd), inv[e % half_hd], &s, &c);
  cos_sin[e] = make_float2(c, s);
}

Frequencies frequencies(int head_dim, double theta) {
  Frequencies freq{};
  for (int k = 0; k < head_dim / 2; ++k) freq.inv[k] = std::pow(theta, -2.0 * k / head_dim);
  return freq;
}

void require_head_dim(const char* name, int head_dim) {
  require(head_dim > 0 && head_dim % 2 == 0 && head_dim / 2 <= kMaxHalfHeadDim, name,
          "head_dim " + std::to_string(head_dim) + " must be even and at most " +
              std::to_string(2 * kMaxHalfHeadDim));
}

}  // namespace

std::int64_t rope_table_bytes(int seq, int head_dim) {
  return static_cast<std::int64_t>(seq) * (head_dim / 2) * 2 *
         static_cast<std::int64_t>(sizeof(float));
}

void rope_table(float* cos_sin, int seq, int head_dim, double theta, cudaStream_t stream) {
  const char* name = "rope_table";
  require_head_dim(name, head_dim);
  require(seq > 0, name, "seq must be positive");
  require(cos_sin != nullptr && reinterpret_cast<std::uintptr_t>(cos_sin) % sizeof(float2) == 0,
          name, "the table must be a float2-aligned buffer");
  const int half = head_dim / 2;
  const std::int64_t entries = static_cast<std::int64_t>(seq) * half;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned>((entries + kThreads - 1) / kThreads);
  launch_kernel(rope_table_kernel, blocks, kThreads, 0, stream, reinterpret_cast<float2*>(cos_sin),
                entries, half, frequencies(head_dim, theta));
  CUDA_CHECK_LAUNCH();
}

void rope(Mat x, int seq, int head_dim, double theta, bool inverse, cudaStream_t stream) {
  const char* name = inverse ? "rope_backward" : "rope_forward";
  require_head_dim(name, head_dim);
  require(x.cols % head_dim == 0, name,
          "width " + std::to_string(x.cols) + " is not a multiple of head_dim " +
              std::to_string(head_dim));
  require(seq > 0, name, "seq must be positive");
  require(x.rows % seq == 0, name,
          "rows " + std::to_string(x.rows) + " is not a multiple of seq " + std::to_string(seq));
  if (x.numel() == 0) return;
  require(
      x.ld % 2 == 0 && reinterpret_cast<std::uintptr_t>(x.data) % (2 * dtype_size(x.dtype)) == 0,
      name, "rows must start on a pair boundary (even row stride, pair-aligned base)");
  const Frequencies freq = frequencies(head_dim, theta);
  const int half = head_dim / 2;
  dispatch_float(x.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // A vector never straddles rows; pairs stay whole because Vec is even.
    const int vec = vec_width<T>({&x});
    auto launch = [&](auto width) {
      constexpr int kVec = decltype(width)::value;
      const RowLaunch l = row_launch(x.rows, x.cols / kVec);
      launch_kernel(rope_kernel<T, kVec>, l.grid, l.block, 0, stream, x.ptr<T>(), x.ld, x.rows,
                    x.cols / kVec, seq, half, freq, inverse ? -1.f : 1.f);
      CUDA_CHECK_LAUNCH();
    };
    if (vec == kMaxVec<T>) {
      launch(std::integral_constant<int, kMaxVec<T>>{});
    } else {
      launch(std::integral_constant<int, 2>{});  // head_dim is even: pairs are always aligned
    }
  });
}

}  // namespace tinyllama::cuda
