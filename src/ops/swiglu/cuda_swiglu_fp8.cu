// The SwiGLU kernels that write the FP8 codes of what they compute (issue
// 45; cuda_swiglu.h): each value is computed as swiglu_forward /
// swiglu_backward compute it, rounded to the activation dtype as their
// store rounds it, then cast in the tiles of cuda_fp8_tile.cuh as
// fp8_cast_transpose casts the stored tensor. So a fused launch leaves the
// codes (and the amax) that the two launches leave, bit for bit, without
// the bf16 tensor's round trip through memory.
#include "ops/elementwise/cuda_elementwise_kernel.cuh"
#include "ops/linear/cuda_fp8_tile.cuh"
#include "ops/swiglu/cuda_swiglu.h"
#include "ops/swiglu/swiglu_math.cuh"

namespace tinyllama::cuda {
namespace {

using elementwise::View;
using elementwise::view;

// One 64 x 64 tile of h = silu(g) * u per block: its codes, and its values
// into hidden when hidden.p is not null.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    swiglu_forward_fp8_kernel(View<T> hidden, View<const T> gate, View<const T> up, Fp8TileOut o) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  constexpr int kVec = kMaxVec<T>;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kCastTile;
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kCastTile;
  const auto produce = [&](int i, int col, float(&v)[1][kVec]) {
    const std::int64_t r = r0 + i;
    const std::int64_t c = c0 + col;
    float g[kVec], u[kVec];
    load_f32<kVec>(&gate.at(r, c), g);
    load_f32<kVec>(&up.at(r, c), u);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[0][k] = through<T>(swiglu_value(g[k], u[k]));
    if (hidden.p != nullptr) store_f32<kVec>(&hidden.at(r, c), v[0]);
  };
  cast_tiles<kVec, 1>(produce, r0, c0, 0, o);
}

// One 64 x 64 tile of dh per block, giving two tiles of the [rows, 2F]
// gradient: the gate's at column c0, the up's at F + c0 (part_cols = F).
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    swiglu_backward_fp8_kernel(View<T> dgate, View<T> dup, View<const T> dout, View<const T> gate,
                               View<const T> up, std::int64_t part_cols, Fp8TileOut o) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  constexpr int kVec = kMaxVec<T>;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kCastTile;
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kCastTile;
  const auto produce = [&](int i, int col, float(&v)[2][kVec]) {
    const std::int64_t r = r0 + i;
    const std::int64_t c = c0 + col;
    float dh[kVec], g[kVec], u[kVec];
    load_f32<kVec>(&dout.at(r, c), dh);
    load_f32<kVec>(&gate.at(r, c), g);
    load_f32<kVec>(&up.at(r, c), u);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      float dg, du;
      swiglu_grads(dh[k], g[k], u[k], dg, du);
      v[0][k] = through<T>(dg);
      v[1][k] = through<T>(du);
    }
    if (dgate.p != nullptr) {
      store_f32<kVec>(&dgate.at(r, c), v[0]);
      store_f32<kVec>(&dup.at(r, c), v[1]);
    }
  };
  cast_tiles<kVec, 2>(produce, r0, c0, part_cols, o);
}

// Whether the fused kernels take these views: whole 64 x 64 tiles of the
// [rows, F] inputs, every bf16 view read and written in 16-byte vectors,
// the row-major codes in 8-byte stores and the transposed in 16-byte ones,
// and a grid within CUDA's limit.
template <typename T>
bool tiles_fit(std::initializer_list<const Mat*> views, const Fp8View& out, const Fp8View& out_t) {
  const Mat& first = **views.begin();
  return first.rows % kCastTile == 0 && first.cols % kCastTile == 0 &&
         first.rows / kCastTile <= 65535 && vec_width<T>(views) == kMaxVec<T> &&
         tile_store_aligned(out.codes, out.ld, kMaxVec<T>) &&
         tile_store_aligned(out_t.codes, out_t.ld, kGather);
}

dim3 tile_grid(const Mat& m) {
  return dim3(static_cast<unsigned>(m.cols / kCastTile), static_cast<unsigned>(m.rows / kCastTile));
}

Fp8TileOut tile_out(const float* scale, Fp8Format f, Fp8View out, Fp8View out_t, float* amax) {
  return Fp8TileOut{scale,
                    fp8_interpretation(f),
                    out.codes,
                    out.ld,
                    out_t.codes,
                    out_t.ld,
                    reinterpret_cast<unsigned*>(amax)};
}

// No copy at all is an amax pass: it must record the amax.
void check_fp8_outputs(const char* op, const float* scale, Fp8View out, Fp8View out_t,
                       const float* amax) {
  require(scale != nullptr, op, "no scale");
  require(out.codes != nullptr || out_t.codes != nullptr || amax != nullptr, op,
          "no FP8 output and no amax");
}

}  // namespace

bool try_swiglu_forward_fp8(Mat hidden, bool keep_hidden, Mat gate, Mat up, const float* scale,
                            Fp8Format f, Fp8View out, Fp8View out_t, float* amax,
                            cudaStream_t stream) {
  const char* op = "swiglu_forward_fp8";
  for (const Mat* m : {&gate, &up}) require_same_shape(op, hidden, *m);
  check_fp8_outputs(op, scale, out, out_t, amax);
  if (hidden.dtype != DType::BF16 || gate.dtype != hidden.dtype || up.dtype != hidden.dtype) {
    return false;
  }
  using T = __nv_bfloat16;
  if (!tiles_fit<T>({&hidden, &gate, &up}, out, out_t)) return false;
  if (hidden.numel() == 0) return true;
  View<T> kept = view<T>(hidden);
  if (!keep_hidden) kept.p = nullptr;
  launch_kernel(swiglu_forward_fp8_kernel<T>, tile_grid(hidden), dim3(kTileThreads), 0, stream,
                kept, view<const T>(gate), view<const T>(up), tile_out(scale, f, out, out_t, amax));
  CUDA_CHECK_LAUNCH();
  return true;
}

bool try_swiglu_backward_fp8(Mat dgate, Mat dup, bool keep_grads, Mat dout, Mat gate, Mat up,
                             const float* scale, Fp8Format f, Fp8View out, Fp8View out_t,
                             float* amax, cudaStream_t stream) {
  const char* op = "swiglu_backward_fp8";
  for (const Mat* m : {&dup, &dout, &gate, &up}) require_same_shape(op, dgate, *m);
  check_fp8_outputs(op, scale, out, out_t, amax);
  for (const Mat* m : {&dgate, &dup, &dout, &gate, &up}) {
    if (m->dtype != DType::BF16) return false;
  }
  using T = __nv_bfloat16;
  if (!tiles_fit<T>({&dgate, &dup, &dout, &gate, &up}, out, out_t)) return false;
  if (dgate.numel() == 0) return true;
  View<T> kept_gate = view<T>(dgate);
  View<T> kept_up = view<T>(dup);
  if (!keep_grads) kept_gate.p = kept_up.p = nullptr;
  launch_kernel(swiglu_backward_fp8_kernel<T>, tile_grid(dgate), dim3(kTileThreads), 0, stream,
                kept_gate, kept_up, view<const T>(dout), view<const T>(gate), view<const T>(up),
                dgate.cols, tile_out(scale, f, out, out_t, amax));
  CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace tinyllama::cuda
