// FP8 amax, scale and casts on the device (cuda_fp8_cast.h). Every kernel
// does exactly the fp32 arithmetic of its CPU twin in cpu_fp8.cc, so the two
// agree bit for bit: the amax is a maximum (no rounding), the scale is
// computed in double and rounded once to fp32 as fp8_scale_for does, the
// inverse is the correctly rounded fp32 reciprocal, and the cast multiplies
// in fp32 (__fmul_rn: never contracted) and rounds with the hardware's
// cvt.rn.satfinite (nearest even, saturating), as the codecs of
// core/narrow_float.h do.
#include <cuda_fp8.h>

#include <cfloat>
#include <cstdint>

#include "device/cuda_common.cuh"
#include "device/cuda_vec.cuh"
#include "ops/linear/cuda_fp8_cast.h"
#include "ops/linear/cuda_fp8_tile.cuh"
#include "ops/linear/fp8_tensor.h"

namespace tinyllama::cuda {
namespace {

// ---- amax ------------------------------------------------------------------------

template <typename T, int Vec>
__global__ void amax_kernel(const T* __restrict__ x, std::int64_t rows, std::int64_t chunks,
                            std::int64_t ld, unsigned* __restrict__ amax_bits) {
  unsigned m = 0;
  const std::int64_t chunk = my_chunk();
  if (chunk < chunks) {
    for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
      float v[Vec];
      load_f32<Vec>(x + r * ld + chunk * Vec, v);
#pragma unroll
      for (int i = 0; i < Vec; ++i) m = max(m, abs_bits(v[i]));
    }
  }
  raise_amax(m, amax_bits);
}

// ---- scale -----------------------------------------------------------------------

// cpu::fp8_scale_for's arithmetic: in double, rounded once to fp32.
__device__ __forceinline__ float scale_for(float a, double max_finite, int margin) {
  if (!(a > 0.0f) || !isfinite(a)) return 1.0f;
  const double q = max_finite / static_cast<double>(a) / ldexp(1.0, margin);
  return q > static_cast<double>(FLT_MAX) ? FLT_MAX : static_cast<float>(q);
}

__global__ void scale_kernel(const float* __restrict__ amax, double max_finite, int margin,
                             float* __restrict__ scale, float* __restrict__ inverse_scale) {
  const float s = scale_for(*amax, max_finite, margin);
  if (scale != nullptr) *scale = s;
  if (inverse_scale != nullptr) *inverse_scale = __fdiv_rn(1.0f, s);
}

// One thread per block: the amax pushed onto the history, the scale from
// the history's maximum (bit patterns: a NaN wins, as in the amax).
__global__ void update_scales_kernel(float* __restrict__ blocks, int count, double max_finite) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= count) return;
  float* b = blocks + static_cast<std::ptrdiff_t>(i) * kFp8Block;
  float* history = b + kFp8HistoryAt;
  for (int h = kFp8History - 1; h > 0; --h) history[h] = history[h - 1];
  history[0] = b[kFp8Amax];
  unsigned most = 0;
  for (int h = 0; h < kFp8History; ++h) most = max(most, abs_bits(history[h]));
  const float s = scale_for(__uint_as_float(most), max_finite, 0);
  b[kFp8Scale] = s;
  b[kFp8Inverse] = __fdiv_rn(1.0f, s);
  b[kFp8Amax] = 0.0f;
}

// ---- cast --------------------------------------------------------------------------

template <typename T, int Vec>
__global__ void cast_kernel(const T* __restrict__ x, std::int64_t rows, std::int64_t chunks,
                            std::int64_t ld, const float* __restrict__ scale,
                            __nv_fp8_interpretation_t kind, std::uint8_t* __restrict__ out,
                            std::int64_t ld_out, unsigned* __restrict__ amax_bits) {
  const std::int64_t chunk = my_chunk();
  const float s = *scale;
  unsigned m = 0;
  if (chunk < chunks) {  // no early return: raise_amax reduces over the whole block
    for (std::int64_t r = first_row(); r < rows; r += row_stride()) {
      float v[Vec];
      load_f32<Vec>(x + r * ld + chunk * Vec, v);
      std::uint8_t c[Vec];
#pragma unroll
      for (int i = 0; i < Vec; ++i) {
        c[i] = fp8_code(__fmul_rn(v[i], s), kind);
        m = max(m, abs_bits(v[i]));
      }
      store_codes<Vec>(out + r * ld_out + chunk * Vec, c);
    }
  }
  raise_amax(m, amax_bits);
}

// ---- cast with transpose -------------------------------------------------------------

// Two variants, side by side (the host picks, fp8_cast_transpose):
//
// cast_transpose_tiled_kernel, for views whose tiles are whole and aligned:
// a 64 x 64 tile per block of 256 threads (cuda_fp8_tile.cuh: 16-byte
// loads, the direct copy's codes as one 8-byte or 4-byte store, the
// transposed copy's as 16-byte stores gathered from a shared tile). The
// bytes move in full sectors both ways, which the one-element-per-thread
// variant does not do (2-byte loads and 1-byte stores reach a third of HBM
// bandwidth).
//
// cast_transpose_kernel, any shape and alignment: a 32 x 32 tile per block
// of 32 x 8 threads, one element per thread, the codes through shared memory.
constexpr int kTile = 32;
constexpr int kTileRowsPerPass = 8;

// The tiles and their stores are cuda_fp8_tile.cuh's (cast_tiles), shared
// with the producers that cast what they compute.
template <typename T>
__global__ void __launch_bounds__(kTileThreads)
    cast_transpose_tiled_kernel(const T* __restrict__ x, std::int64_t ld, Fp8TileOut o) {
  constexpr int kVec = kMaxVec<T>;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kCastTile;
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kCastTile;
  cast_tiles<kVec, 1>(
      [&](int i, int col, float(&v)[1][kVec]) {
        load_f32<kVec>(x + (r0 + i) * ld + c0 + col, v[0]);
      },
      r0, c0, 0, o);
}

template <typename T>
__global__ void cast_transpose_kernel(const T* __restrict__ x, std::int64_t rows, std::int64_t cols,
                                      std::int64_t ld, const float* __restrict__ scale,
                                      __nv_fp8_interpretation_t kind,
                                      std::uint8_t* __restrict__ out, std::int64_t ld_out,
                                      std::uint8_t* __restrict__ out_t, std::int64_t ld_t,
                                      unsigned* __restrict__ amax_bits) {
  __shared__ std::uint8_t tile[kTile][kTile + 4];  // padded: transposed reads hit distinct banks
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * kTile;
  const std::int64_t c0 = static_cast<std::int64_t>(blockIdx.x) * kTile;
  const int tx = static_cast<int>(threadIdx.x);
  const float s = *scale;
  unsigned m = 0;
  for (int i = static_cast<int>(threadIdx.y); i < kTile; i += kTileRowsPerPass) {
    const std::int64_t r = r0 + i;
    const std::int64_t c = c0 + tx;
    if (r < rows && c < cols) {
      const float v = to_f32(x[r * ld + c]);
      const std::uint8_t code = fp8_code(__fmul_rn(v, s), kind);
      m = max(m, abs_bits(v));
      if (out != nullptr) out[r * ld_out + c] = code;
      tile[i][tx] = code;
    }
  }
  raise_amax(m, amax_bits);
  if (out_t == nullptr) return;  // uniform over the block: no barrier is skipped by some threads
  __syncthreads();
  for (int i = static_cast<int>(threadIdx.y); i < kTile; i += kTileRowsPerPass) {
    const std::int64_t c = c0 + i;   // a row of out_t
    const std::int64_t r = r0 + tx;  // a column of out_t
    if (r < rows && c < cols) out_t[c * ld_t + r] = tile[tx][i];
  }
}

// The vector width of the cast: 16 bytes of input per thread where every
// row of x and of out is aligned for it, else one element.
template <typename T>
int cast_vec(const Mat& x, const Fp8View& out) {
  const int vec = vec_width<T>({&x});
  const auto addr = reinterpret_cast<std::uintptr_t>(out.codes);
  return vec > 1 && out.ld % vec == 0 && addr % static_cast<unsigned>(vec) == 0 ? vec : 1;
}

// Whether the tiled variant can take x -> (out, out_t): whole 64 x 64
// tiles that cast_vec reads and writes in full vectors, and 16-byte aligned
// rows of out_t.
template <typename T>
bool tiled_cast_fits(const Mat& x, const Fp8View& out, const Fp8View& out_t) {
  return x.rows % kCastTile == 0 && x.cols % kCastTile == 0 && cast_vec<T>(x, out) == kMaxVec<T> &&
         tile_store_aligned(out_t.codes, out_t.ld, kGather);
}

void check_input(const char* op, const Mat& x) {
  require(x.dtype == DType::F32 || x.dtype == DType::BF16 || x.dtype == DType::F16, op,
          "x must be float32, bfloat16 or float16, got " + shape_str(x));
  require(x.rows >= 0 && x.cols >= 0 && x.ld >= x.cols, op, "bad view " + shape_str(x));
}

// Calls fn(TypeTag<T>{}) with the type the kernels read x as: its storage
// type, or F32AsBf16 for Fp8Source::Bf16OfF32.
template <typename Fn>
void dispatch_source(const Mat& x, Fp8Source source, const char* op, Fn&& fn) {
  if (source == Fp8Source::AsStored) {
    dispatch_float(x.dtype, op, fn);
    return;
  }
  require(x.dtype == DType::F32, op, "a source read as bf16 must be float32, got " + shape_str(x));
  fn(TypeTag<F32AsBf16>{});
}

}  // namespace

void fp8_amax(const Mat& x, float* amax, cudaStream_t stream, Fp8Source source) {
  const char* op = "fp8_amax";
  check_input(op, x);
  require(amax != nullptr, op, "no output");
  CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), stream));
  if (x.rows == 0 || x.cols == 0) return;
  dispatch_source(x, source, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_vec<T>(vec_width<T>({&x}), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const std::int64_t chunks = x.cols / kVec;
      const RowLaunch l = row_launch(x.rows, chunks);
      amax_kernel<T, kVec><<<l.grid, l.block, 0, stream>>>(x.ptr<const T>(), x.rows, chunks, x.ld,
                                                           reinterpret_cast<unsigned*>(amax));
      CUDA_CHECK_LAUNCH();
    });
  });
}

void fp8_scale_from_amax(const float* amax, Fp8Format f, int margin, float* scale,
                         float* inverse_scale, cudaStream_t stream) {
  require(amax != nullptr, "fp8_scale_from_amax", "no amax");
  scale_kernel<<<1, 1, 0, stream>>>(amax, static_cast<double>(fp8_max_finite_f32(f)), margin, scale,
                                    inverse_scale);
  CUDA_CHECK_LAUNCH();
}

void fp8_cast(const Mat& x, const float* scale, Fp8Format f, Fp8View out, cudaStream_t stream,
              float* amax, Fp8Source source) {
  const char* op = "fp8_cast";
  check_input(op, x);
  require(scale != nullptr && out.codes != nullptr, op, "no scale or no output");
  require(out.ld >= x.cols, op, "the output's row stride is below x's width");
  if (x.rows == 0 || x.cols == 0) return;
  dispatch_source(x, source, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    dispatch_vec<T>(cast_vec<T>(x, out), [&](auto vec) {
      constexpr int kVec = decltype(vec)::value;
      const std::int64_t chunks = x.cols / kVec;
      const RowLaunch l = row_launch(x.rows, chunks);
      cast_kernel<T, kVec><<<l.grid, l.block, 0, stream>>>(
          x.ptr<const T>(), x.rows, chunks, x.ld, scale, fp8_interpretation(f), out.codes, out.ld,
          reinterpret_cast<unsigned*>(amax));
      CUDA_CHECK_LAUNCH();
    });
  });
}

void fp8_cast_transpose(const Mat& x, const float* scale, Fp8Format f, Fp8View out, Fp8View out_t,
                        cudaStream_t stream, float* amax, Fp8Source source) {
  const char* op = "fp8_cast_transpose";
  check_input(op, x);
  require(scale != nullptr, op, "no scale");
  require(out.codes != nullptr || out_t.codes != nullptr, op, "no output");
  require(out.codes == nullptr || out.ld >= x.cols, op, "out's row stride is below x's width");
  require(out_t.codes == nullptr || out_t.ld >= x.rows, op,
          "out_t's row stride is below x's height");
  if (x.rows == 0 || x.cols == 0) return;
  dispatch_source(x, source, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (tiled_cast_fits<T>(x, out, out_t)) {
      require(x.rows / kCastTile <= 65535, op, "too many rows (" + std::to_string(x.rows) + ")");
      const dim3 grid(static_cast<unsigned>(x.cols / kCastTile),
                      static_cast<unsigned>(x.rows / kCastTile));
      const Fp8TileOut o{scale,
                         fp8_interpretation(f),
                         out.codes,
                         out.ld,
                         out_t.codes,
                         out_t.ld,
                         reinterpret_cast<unsigned*>(amax)};
      cast_transpose_tiled_kernel<T><<<grid, kTileThreads, 0, stream>>>(x.ptr<const T>(), x.ld, o);
      CUDA_CHECK_LAUNCH();
      return;
    }
    const std::int64_t tiles_r = (x.rows + kTile - 1) / kTile;
    const std::int64_t tiles_c = (x.cols + kTile - 1) / kTile;
    require(tiles_r <= 65535, op, "too many rows (" + std::to_string(x.rows) + ")");
    const dim3 grid(static_cast<unsigned>(tiles_c), static_cast<unsigned>(tiles_r));
    const dim3 block(kTile, kTileRowsPerPass);
    cast_transpose_kernel<T><<<grid, block, 0, stream>>>(
        x.ptr<const T>(), x.rows, x.cols, x.ld, scale, fp8_interpretation(f), out.codes, out.ld,
        out_t.codes, out_t.ld, reinterpret_cast<unsigned*>(amax));
    CUDA_CHECK_LAUNCH();
  });
}

void fp8_update_scales(float* blocks, int count, Fp8Format f, cudaStream_t stream) {
  require(blocks != nullptr || count == 0, "fp8_update_scales", "no blocks");
  if (count <= 0) return;
  constexpr int kThreads = 128;
  update_scales_kernel<<<(count + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      blocks, count, static_cast<double>(fp8_max_finite_f32(f)));
  CUDA_CHECK_LAUNCH();
}

}  // namespace tinyllama::cuda
