// Rotary position embedding on interleaved pairs, in place. The angle
// p * theta^(-2i/hd) reaches ~1e3 rad at long sequences, where fp32 keeps
// only ~1e-4 rad of it; so the frequencies are computed on the host in
// double, the angle is formed and reduced modulo 2*pi in double, and only the
// reduced angle goes through fp32 sin/cos.
#include <cmath>

#include "cuda/cuda_common.cuh"
#include "cuda/cuda_ops.h"

namespace tinyllama::cuda {
namespace {

constexpr int kMaxHalfHeadDim = 256;  // head_dim up to 512

struct Frequencies {
  double inv[kMaxHalfHeadDim];
};

template <typename T>
__global__ void rope_kernel(T* __restrict__ x, std::int64_t ld, std::int64_t rows,
                            std::int64_t pairs_per_row, int seq, int half_hd,
                            const Frequencies freq, float sign) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const std::int64_t n = rows * pairs_per_row;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / pairs_per_row;
    const std::int64_t pair = i - r * pairs_per_row;
    const int k = static_cast<int>(pair % half_hd);  // pair index inside its head
    const double angle = static_cast<double>(r % seq) * freq.inv[k];
    const float reduced = static_cast<float>(angle - kTwoPi * rint(angle / kTwoPi));
    float s, c;
    sincosf(reduced, &s, &c);
    s *= sign;  // the inverse rotation is the rotation by -angle
    T* p = x + r * ld + 2 * pair;
    const float a = to_f32(p[0]);
    const float b = to_f32(p[1]);
    p[0] = from_f32<T>(a * c - b * s);
    p[1] = from_f32<T>(a * s + b * c);
  }
}

}  // namespace

void rope(Mat x, int seq, int head_dim, double theta, bool inverse, cudaStream_t stream) {
  const char* name = inverse ? "rope_backward" : "rope_forward";
  require(head_dim > 0 && head_dim % 2 == 0 && head_dim / 2 <= kMaxHalfHeadDim, name,
          "head_dim " + std::to_string(head_dim) + " must be even and at most " +
              std::to_string(2 * kMaxHalfHeadDim));
  require(x.cols % head_dim == 0, name,
          "width " + std::to_string(x.cols) + " is not a multiple of head_dim " +
              std::to_string(head_dim));
  require(seq > 0, name, "seq must be positive");
  require(x.rows % seq == 0, name,
          "rows " + std::to_string(x.rows) + " is not a multiple of seq " + std::to_string(seq));
  if (x.numel() == 0) return;
  Frequencies freq{};
  const int half = head_dim / 2;
  for (int k = 0; k < half; ++k) freq.inv[k] = std::pow(theta, -2.0 * k / head_dim);
  const std::int64_t pairs = x.cols / 2;
  dispatch_float(x.dtype, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    rope_kernel<T><<<grid_for(x.rows * pairs), kThreads, 0, stream>>>(
        x.ptr<T>(), x.ld, x.rows, pairs, seq, half, freq, inverse ? -1.f : 1.f);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tinyllama::cuda
