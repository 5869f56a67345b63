// The SwiGLU GEMMs (swiglu_gemm.h) on Hopper: a 128 x 128 output tile per
// block, two warpgroups of 64 rows each on m64n128k16 wgmma with fp32
// accumulators, operands brought by TMA in 128-byte-swizzled 64-wide k
// steps through a ring of kStages shared-memory stages. Thread 0 starts the
// copies; a "full" barrier per stage says a stage has landed, an "empty"
// barrier (one arrival per warpgroup) that both are done reading it. No
// warp is set aside as a producer: at 96 KiB of stages and 128 registers a
// thread, two blocks share an SM, so one block's epilogue (the SwiGLU,
// memory-bound) runs under the other's products.
//
// The B tile of the forward is 64 gate rows and the 64 up rows F below them
// (w_gu is K-major), so each thread holds a gate value and its up value in
// accumulators nt and nt + 8; the block writes 64 columns of hidden. The
// backward's B is w_down [D, F] as it lies (N-major: two 64-column boxes per
// k step, read transposed by the descriptor); the block covers 128 columns
// of d_hidden and reads the matching gate and up from global memory.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_launch.cuh"
#include "cuda/flash/flash_attention.h"
#include "cuda/flash/launch.cuh"
#include "cuda/flash/ptx.cuh"
#include "cuda/flash/tma.cuh"
#include "cuda/flash/tma_maps.h"
#include "cuda/flash/wgmma.cuh"
#include "cuda/flash/wgmma_tiles.cuh"
#include "cuda/swiglu_gemm/swiglu_gemm.h"

namespace tinyllama::cuda {
namespace {

using flash::kSwizzleAtomBytes;
using flash::kSwizzleRowBytes;
using flash::smem_u32;
using flash::sw128_desc;

constexpr int kBM = 128;  // rows of a block's tile (tokens)
constexpr int kBN = 128;  // columns of the accumulator tile
constexpr int kBK = 64;   // one 128-byte swizzled k step
constexpr int kStages = 3;
constexpr int kThreads = 256;  // two warpgroups
constexpr int kATileBytes = kBM * kBK * 2;
constexpr int kBTileBytes = kBN * kBK * 2;
constexpr int kStageBytes = kATileBytes + kBTileBytes;
constexpr std::size_t kSmem = kSwizzleAtomBytes + kStages * kStageBytes + 2 * kStages * 8;
// Blocks walk the tiles in groups of this many row tiles, row tile fastest,
// so that the blocks resident at once share their weight tiles in L2.
constexpr int kGroupRows = 16;

enum class Epi { Forward, Backward };

struct EpiArgs {
  int rows;  // N (tokens)
  int ffn;   // F
  int k;     // D, the reduction
  void* gu;  // forward: written; backward: read (gate, up)
  long ld_gu;
  void* out;  // forward: hidden [N, F]; backward: d_gate_up [N, 2F]
  long ld_out;
};

template <typename T>
__device__ __forceinline__ float2 unpack2(unsigned v);
template <>
__device__ __forceinline__ float2 unpack2<__nv_bfloat16>(unsigned v) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
}
template <>
__device__ __forceinline__ float2 unpack2<__half>(unsigned v) {
  return __half22float2(*reinterpret_cast<const __half2*>(&v));
}

// As the elementwise kernels compute it (cuda_elementwise.cu).
__device__ __forceinline__ float sigmoid_f(float x) {
  return 1.f / (1.f + expf(-x));
}

template <typename T, Epi E>
__global__ void __launch_bounds__(kThreads, 2)
    swiglu_gemm_kernel(const __grid_constant__ CUtensorMap ta,
                       const __grid_constant__ CUtensorMap tb, const EpiArgs a) {
#if defined(TINYLLAMA_WGMMA_AVAILABLE)
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = flash::align_atom(smem_raw);
  auto* full = reinterpret_cast<std::uint64_t*>(smem + kStages * kStageBytes);
  std::uint64_t* empty = full + kStages;
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;

  // The tile: groups of kGroupRows row tiles, the row tile fastest.
  const int m_tiles = (a.rows + kBM - 1) / kBM;
  const int n_tiles = E == Epi::Forward ? a.ffn / 64 : (a.ffn + kBN - 1) / kBN;
  const int per_group = kGroupRows * n_tiles;
  const int bid = static_cast<int>(blockIdx.x);
  const int group = bid / per_group;
  const int first_m = group * kGroupRows;
  const int rows_in_group = min(kGroupRows, m_tiles - first_m);
  const int tm = first_m + (bid % per_group) % rows_in_group;
  const int tn = (bid % per_group) / rows_in_group;

  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      flash::mbar_init(&full[s], 1);
      flash::mbar_init(&empty[s], 2);
    }
    flash::mbar_init_fence();
  }
  __syncthreads();
  pdl_wait_previous();  // first read of global memory: PDL (cuda/cuda_launch.cuh)
  pdl_allow_next();

  const int nk = (a.k + kBK - 1) / kBK;
  auto a_tile = [&](int s) { return smem + s * kStageBytes; };
  auto b_tile = [&](int s) { return smem + s * kStageBytes + kATileBytes; };
  auto issue = [&](int kt) {
    const int s = kt % kStages;
    flash::mbar_expect_tx(&full[s], kStageBytes);
    flash::tma_load_2d(a_tile(s), &ta, kt * kBK, tm * kBM, &full[s]);
    if constexpr (E == Epi::Forward) {  // 64 gate rows, then their 64 up rows
      flash::tma_load_2d(b_tile(s), &tb, kt * kBK, tn * 64, &full[s]);
      flash::tma_load_2d(b_tile(s) + kBTileBytes / 2, &tb, kt * kBK, a.ffn + tn * 64, &full[s]);
    } else {  // k rows of w_down, two 64-column boxes
      flash::tma_load_2d(b_tile(s), &tb, tn * kBN, kt * kBK, &full[s]);
      flash::tma_load_2d(b_tile(s) + kBTileBytes / 2, &tb, tn * kBN + 64, kt * kBK, &full[s]);
    }
  };
  if (tid == 0) {
    for (int kt = 0; kt < min(kStages, nk); ++kt) issue(kt);
  }

  // Not zeroed: the first product ignores its old values (scale_d 0), and a
  // zeroing move between the asynchronous products would serialise them.
  float acc[kBN / 8][4];
  for (int kt = 0; kt < nk; ++kt) {
    const int s = kt % kStages;
    flash::mbar_wait(&full[s], (kt / kStages) & 1);
    const unsigned a_addr = smem_u32(a_tile(s)) + wg * 64 * kSwizzleRowBytes;
    const unsigned b_addr = smem_u32(b_tile(s));
    flash::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      const std::uint64_t da = sw128_desc(a_addr + kk * 32, 16, kSwizzleAtomBytes);
      if constexpr (E == Epi::Forward) {
        flash::wgmma_ss<T, kBN, 0, 0>(acc, da, sw128_desc(b_addr + kk * 32, 16, kSwizzleAtomBytes),
                                      kt > 0 || kk > 0);
      } else {
        flash::wgmma_ss<T, kBN, 0, 1>(acc, da,
                                      sw128_desc(b_addr + kk * 16 * kSwizzleRowBytes,
                                                 kBK * kSwizzleRowBytes, kSwizzleAtomBytes),
                                      kt > 0 || kk > 0);
      }
    }
    flash::wgmma_commit();
    flash::wgmma_wait<1>();  // the step before this one has been read
    if (kt > 0) {
      const int prev = (kt - 1) % kStages;
      if ((tid & 127) == 0) flash::mbar_arrive(&empty[prev]);
      if (tid == 0 && kt - 1 + kStages < nk) {
        flash::mbar_wait(&empty[prev], ((kt - 1) / kStages) & 1);
        issue(kt - 1 + kStages);
      }
    }
  }
  flash::wgmma_wait<0>();
  flash::fence_regs(acc);

  // Epilogue: accumulator (nt, e) is row g (+8 for e >= 2) of this warp's
  // 16, column nt * 8 + 2t + (e & 1).
  const int warp = (tid >> 5) & 3;
  const int lane = tid & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int row_base = tm * kBM + wg * 64 + warp * 16 + g;
  T* gu = static_cast<T*>(a.gu);
  T* out = static_cast<T*>(a.out);
  if constexpr (E == Epi::Forward) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row_base + half * 8;
      if (row >= a.rows) continue;
      T* gu_row = gu + static_cast<std::int64_t>(row) * a.ld_gu;
      T* h_row = out + static_cast<std::int64_t>(row) * a.ld_out;
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        const int c = tn * 64 + nt * 8 + 2 * t;
        const unsigned gp = flash::pack2<T>(acc[nt][2 * half], acc[nt][2 * half + 1]);
        const unsigned up = flash::pack2<T>(acc[nt + 8][2 * half], acc[nt + 8][2 * half + 1]);
        *reinterpret_cast<unsigned*>(gu_row + c) = gp;
        *reinterpret_cast<unsigned*>(gu_row + a.ffn + c) = up;
        const float2 gv = unpack2<T>(gp);
        const float2 uv = unpack2<T>(up);
        *reinterpret_cast<unsigned*>(h_row + c) =
            flash::pack2<T>(gv.x * sigmoid_f(gv.x) * uv.x, gv.y * sigmoid_f(gv.y) * uv.y);
      }
    }
  } else {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row_base + half * 8;
      if (row >= a.rows) continue;
      const T* gu_row = gu + static_cast<std::int64_t>(row) * a.ld_gu;
      T* d_row = out + static_cast<std::int64_t>(row) * a.ld_out;
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // four column groups at a time: their loads in flight together
        unsigned gp[4], up[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int c = tn * kBN + (q * 4 + i) * 8 + 2 * t;
          gp[i] = c < a.ffn ? *reinterpret_cast<const unsigned*>(gu_row + c) : 0u;
          up[i] = c < a.ffn ? *reinterpret_cast<const unsigned*>(gu_row + a.ffn + c) : 0u;
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int nt = q * 4 + i;
          const int c = tn * kBN + nt * 8 + 2 * t;
          if (c >= a.ffn) continue;
          // d_hidden as a stored GEMM output would be: rounded to T.
          const float2 dh = unpack2<T>(flash::pack2<T>(acc[nt][2 * half], acc[nt][2 * half + 1]));
          const float2 gv = unpack2<T>(gp[i]);
          const float2 uv = unpack2<T>(up[i]);
          const float s0 = sigmoid_f(gv.x);
          const float s1 = sigmoid_f(gv.y);
          *reinterpret_cast<unsigned*>(d_row + c) =
              flash::pack2<T>(dh.x * uv.x * s0 * (1.f + gv.x * (1.f - s0)),
                              dh.y * uv.y * s1 * (1.f + gv.y * (1.f - s1)));
          *reinterpret_cast<unsigned*>(d_row + a.ffn + c) =
              flash::pack2<T>(dh.x * gv.x * s0, dh.y * gv.y * s1);
        }
      }
    }
  }
#else
  (void)ta;
  (void)tb;
  (void)a;
#endif
}

template <typename T, Epi E>
void launch(const Mat& a_mat, const Mat& b_mat, const EpiArgs& args, cudaStream_t stream) {
  constexpr auto kernel = swiglu_gemm_kernel<T, E>;
  flash::allow_smem<kernel>(kSmem);
  const CUtensorMap ta = flash::tma_map_2d(a_mat, kBM);
  const CUtensorMap tb = flash::tma_map_2d(b_mat, 64);
  const int m_tiles = (args.rows + kBM - 1) / kBM;
  const int n_tiles = E == Epi::Forward ? args.ffn / 64 : (args.ffn + kBN - 1) / kBN;
  launch_kernel(kernel, dim3(static_cast<unsigned>(m_tiles * n_tiles)), dim3(kThreads), kSmem,
                stream, ta, tb, args);
  CUDA_CHECK_LAUNCH();
}

bool aligned16(const Mat& m) {
  return reinterpret_cast<std::uintptr_t>(m.data) % 16 == 0 && (m.ld * 2) % 16 == 0;
}

void require_ready(const char* op, const Mat& x, std::int64_t ffn,
                   std::initializer_list<const Mat*> all) {
  const std::string why = swiglu_gemm_unsupported(x.dtype, x.cols, ffn);
  require(why.empty(), op, why);
  for (const Mat* m : all) {
    require(m->dtype == x.dtype, op, "operands must share one dtype");
    require(aligned16(*m), op, "every operand's rows must start 16-byte aligned");
  }
  require(x.rows <= 0x7fffffff, op, "at most 2^31 - 1 rows");
}

}  // namespace

std::string swiglu_gemm_unsupported(DType dtype, std::int64_t hidden_dim, std::int64_t ffn_dim) {
  if (!flash_hopper_kernels_available()) {
    return "needs an sm_90a build on a compute-capability 9.0 device";
  }
  if (dtype != DType::BF16 && dtype != DType::F16) return "bf16 or fp16 only";
  if (ffn_dim % 64 != 0) return "the FFN width must be a multiple of 64";
  if (hidden_dim % 8 != 0) return "the hidden width must be a multiple of 8";
  return {};
}

void gemm_swiglu_forward(Mat gate_up, Mat hidden, Mat x, Mat w_gu, cudaStream_t stream) {
  const char* op = "gemm_swiglu_forward";
  const std::int64_t f = hidden.cols;
  require(gate_up.rows == x.rows && hidden.rows == x.rows && gate_up.cols == 2 * f, op,
          "gate_up must be [N, 2F] and hidden [N, F] for x's N rows");
  require(w_gu.rows == 2 * f && w_gu.cols == x.cols, op, "w_gu must be [2F, D]");
  require_ready(op, x, f, {&gate_up, &hidden, &x, &w_gu});
  if (x.rows == 0) return;
  const EpiArgs args{static_cast<int>(x.rows),
                     static_cast<int>(f),
                     static_cast<int>(x.cols),
                     gate_up.data,
                     gate_up.ld,
                     hidden.data,
                     hidden.ld};
  if (x.dtype == DType::BF16) {
    launch<__nv_bfloat16, Epi::Forward>(x, w_gu, args, stream);
  } else {
    launch<__half, Epi::Forward>(x, w_gu, args, stream);
  }
}

void gemm_swiglu_backward(Mat d_gate_up, Mat d_out, Mat w_down, Mat gate_up, cudaStream_t stream) {
  const char* op = "gemm_swiglu_backward";
  const std::int64_t f = w_down.cols;
  require(w_down.rows == d_out.cols, op, "w_down must be [D, F] for d_out's D columns");
  require(gate_up.rows == d_out.rows && d_gate_up.rows == d_out.rows && gate_up.cols == 2 * f &&
              d_gate_up.cols == 2 * f,
          op, "gate_up and d_gate_up must be [N, 2F]");
  require_ready(op, d_out, f, {&d_gate_up, &d_out, &w_down, &gate_up});
  if (d_out.rows == 0) return;
  const EpiArgs args{static_cast<int>(d_out.rows),
                     static_cast<int>(f),
                     static_cast<int>(d_out.cols),
                     gate_up.data,
                     gate_up.ld,
                     d_gate_up.data,
                     d_gate_up.ld};
  if (d_out.dtype == DType::BF16) {
    launch<__nv_bfloat16, Epi::Backward>(d_out, w_down, args, stream);
  } else {
    launch<__half, Epi::Backward>(d_out, w_down, args, stream);
  }
}

}  // namespace tinyllama::cuda
