// Flash attention (level v2): causal GQA attention without the S x S score
// matrix. The forward keeps a running max and sum per query row (online
// softmax) while it walks the key tiles, and saves lse = log(sum exp) so the
// backward can recompute P = exp(S - lse) tile by tile.
//
// Two kernel families share the tiling and the loaders:
//  * bf16/fp16: mma.sync m16n8k16 on the tensor cores, fp32 accumulators, a
//    block of 4 warps where each warp owns 16 rows of the tile; operands come
//    from shared memory through ldmatrix, and the probabilities go from the
//    score accumulators straight into the next MMA's A fragments (the C and
//    A fragment layouts line up), so P never touches shared memory.
//  * fp32: plain FMA (no TF32: fp32 means fp32), 128 threads as 8 row groups
//    of 16 lanes, 4 rows per thread and a strided set of columns so the
//    float4 shared-memory reads are free of bank conflicts.
//
// Causality: a query tile only visits key tiles that start at or before its
// last row; only tiles that straddle the diagonal evaluate the mask. GQA:
// query head h reads kv head h / group straight from k/v (no repeat); the
// backward's dK/dV kernel owns one (batch, kv head, key tile) and loops over
// the group's query heads, so dK/dV are summed in registers without atomics.
// dQ has its own kernel per (batch, head, query tile): deterministic, at the
// price of recomputing S and dP once more.
//
// Rows past the sequence end (tails) are zero-filled in shared memory and
// never stored; where they could leak into a sum (dK/dV) they are masked.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/cuda_attention.h"
#include "cuda/cuda_common.cuh"
#include "cuda/cuda_ops.h"
#include "cuda/cuda_vec.cuh"

namespace tinyllama::cuda {
namespace {

constexpr int kFlashThreads = 128;  // 4 warps
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.69314718055994531f;

// ---- PTX wrappers --------------------------------------------------------------

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// src_bytes 0 zero-fills the destination without reading the source.
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void cp_async_4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
               "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

// d += a * b for a 16x16 (row-major) by 16x8 (column-major) tile.
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1);

template <>
__device__ __forceinline__ void mma16816<__nv_bfloat16>(float (&d)[4], const unsigned (&a)[4],
                                                        unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma16816<__half>(float (&d)[4], const unsigned (&a)[4], unsigned b0,
                                                 unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as one register of two 16-bit values, lo in the low half (the
// lower column index, as the MMA fragments expect).
template <typename T>
__device__ __forceinline__ unsigned pack2(float lo, float hi);

template <>
__device__ __forceinline__ unsigned pack2<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&v);
}

template <>
__device__ __forceinline__ unsigned pack2<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const unsigned*>(&v);
}

// The score accumulators of key columns [16*kk, 16*kk+16) as the A operand
// of the next MMA: C fragments of n-tiles 2kk and 2kk+1 are exactly the
// a0..a3 registers of a 16x16 A fragment.
template <typename T, int N>
__device__ __forceinline__ void acc_to_a(unsigned (&a)[4], const float (&c)[N][4], int kk) {
  a[0] = pack2<T>(c[2 * kk][0], c[2 * kk][1]);
  a[1] = pack2<T>(c[2 * kk][2], c[2 * kk][3]);
  a[2] = pack2<T>(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = pack2<T>(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

// ---- tile movement --------------------------------------------------------------

template <typename T>
__device__ __forceinline__ T zero_value() {
  return from_f32<T>(0.f);
}

// Rows [0, ROWS) x columns [0, HD) of a tile whose first element is src (row
// stride ld) into dst (row stride LDS); rows >= valid become zeros. The
// vector path is cp.async (asynchronous: the caller commits and waits); the
// fallback, for strides or bases that are not 16-byte aligned, copies
// element by element synchronously.
template <typename T, int ROWS, int HD, int LDS>
__device__ __forceinline__ void load_tile(T* dst, const T* src, std::int64_t ld, int valid,
                                          bool vec) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  constexpr int kChunksPerRow = HD / kPer;
  constexpr int kChunks = ROWS * kChunksPerRow;
  static_assert(kChunks % kFlashThreads == 0, "tile must split evenly over the block");
  if (vec) {
#pragma unroll
    for (int i = 0; i < kChunks / kFlashThreads; ++i) {
      const int c = static_cast<int>(threadIdx.x) + i * kFlashThreads;
      const int r = c / kChunksPerRow;
      const int col = (c % kChunksPerRow) * kPer;
      const bool ok = r < valid;
      cp_async_16(dst + r * LDS + col, src + (ok ? r * ld + col : 0), ok);
    }
  } else {
    for (int c = static_cast<int>(threadIdx.x); c < ROWS * HD; c += kFlashThreads) {
      const int r = c / HD;
      const int col = c % HD;
      dst[r * LDS + col] = r < valid ? src[r * ld + col] : zero_value<T>();
    }
  }
}

// One warp copies rows [0, valid) of a 16-row staging tile to global memory.
template <typename T, int HD, int LDS>
__device__ __forceinline__ void store_warp_rows(T* dst, std::int64_t ld, const T* src, int valid,
                                                bool vec, int lane) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  constexpr int kChunksPerRow = HD / kPer;
  if (vec) {
#pragma unroll
    for (int i = 0; i < 16 * kChunksPerRow / 32; ++i) {
      const int c = lane + 32 * i;
      const int r = c / kChunksPerRow;
      const int col = (c % kChunksPerRow) * kPer;
      if (r < valid) {
        *reinterpret_cast<uint4*>(dst + r * ld + col) =
            *reinterpret_cast<const uint4*>(src + r * LDS + col);
      }
    }
  } else {
    for (int c = lane; c < 16 * HD; c += 32) {
      const int r = c / HD;
      if (r < valid) dst[r * ld + c % HD] = src[r * LDS + c % HD];
    }
  }
}

// ---- arguments -------------------------------------------------------------------

struct FwdArgs {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* lse;
  std::int64_t ldq, ldk, ldv, ldo, ld_lse;
  int seq, heads, group;
  float scale_log2;  // 1/sqrt(hd) * log2(e): scores live in the exp2 domain
  bool vec;          // every base and row stride allows 16-byte accesses
};

struct BwdArgs {
  const void* q;
  const void* k;
  const void* v;
  const void* dout;
  void* dq;
  void* dk;
  void* dv;
  const float* lse;
  const float* delta;  // [B*H, S], row stride seq
  std::int64_t ldq, ldk, ldv, ld_dout, ld_dq, ld_dk, ld_dv, ld_lse;
  int seq, heads, group;
  float scale;
  float scale_log2;
  bool vec;
};

// Register budgets where ptxas' own choice under __launch_bounds__ spills a
// few bytes (it aims at 128 registers at hd 64 and 168 at hd 128): enough to
// hold the accumulators, low enough to keep 2-4 blocks per SM.
constexpr int flash_reg_budget(int hd, int at128, int at64, int at32) {
  return hd == 128 ? at128 : hd == 64 ? at64 : at32;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// ================================================================================
// Tensor-core kernels (bf16 / fp16)
// ================================================================================
//
// Fragment addressing, with lane = 0..31, g = lane / 4, t = lane % 4:
//  * A operand, 16 rows x 16 k from a row-major tile: lane supplies row
//    (lane & 15), column (lane >> 4) * 8.
//  * B operand from a tile stored [n][k] (K for Q K^T): one x4 load gives two
//    n-tiles of 8; lane supplies row (lane & 7) + (lane >> 4) * 8, column
//    ((lane >> 3) & 1) * 8.
//  * B operand from a tile stored [k][n] (V for P V): x4.trans; lane supplies
//    row (lane & 7) + ((lane >> 3) & 1) * 8, column (lane >> 4) * 8.
//  * accumulator element (row g or g + 8, column 2t or 2t + 1) of each n-tile.
// Shared tiles have a row stride of HD + 8 elements: 16 bytes of padding put
// the 8 rows an ldmatrix phase reads into 8 different bank groups.

template <int HD>
struct MmaTile {
  static constexpr int LDS = HD + 8;
};

__device__ __forceinline__ int a_row(int lane) {
  return lane & 15;
}
__device__ __forceinline__ int a_col(int lane) {
  return (lane >> 4) * 8;
}
__device__ __forceinline__ int bnk_row(int lane) {
  return (lane & 7) + ((lane >> 4) << 3);
}
__device__ __forceinline__ int bnk_col(int lane) {
  return ((lane >> 3) & 1) * 8;
}
__device__ __forceinline__ int bkn_row(int lane) {
  return (lane & 7) + (((lane >> 3) & 1) << 3);
}
__device__ __forceinline__ int bkn_col(int lane) {
  return (lane >> 4) * 8;
}

// acc[BN/8][4] += A[16 rows of a_tile] * B[BN rows of b_tile]^T over HD.
template <typename T, int HD, int BN>
__device__ __forceinline__ void mma_abt(float (&acc)[BN / 8][4], const T* a_tile, const T* b_tile,
                                        int lane) {
  constexpr int LDS = MmaTile<HD>::LDS;
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    unsigned a[4];
    ldmatrix_x4(a, a_tile + a_row(lane) * LDS + kk * 16 + a_col(lane));
#pragma unroll
    for (int nn = 0; nn < BN / 16; ++nn) {
      unsigned b[4];
      ldmatrix_x4(b, b_tile + (nn * 16 + bnk_row(lane)) * LDS + kk * 16 + bnk_col(lane));
      mma16816<T>(acc[2 * nn], a, b[0], b[1]);
      mma16816<T>(acc[2 * nn + 1], a, b[2], b[3]);
    }
  }
}

// acc[HD/8][4] += P (16 x BK, from accumulators) * B (BK rows x HD of b_tile).
template <typename T, int HD, int BK>
__device__ __forceinline__ void mma_pb(float (&acc)[HD / 8][4], const float (&p)[BK / 8][4],
                                       const T* b_tile, int lane) {
  constexpr int LDS = MmaTile<HD>::LDS;
#pragma unroll
  for (int kk = 0; kk < BK / 16; ++kk) {
    unsigned a[4];
    acc_to_a<T>(a, p, kk);
#pragma unroll
    for (int dn = 0; dn < HD / 16; ++dn) {
      unsigned b[4];
      ldmatrix_x4_trans(b, b_tile + (kk * 16 + bkn_row(lane)) * LDS + dn * 16 + bkn_col(lane));
      mma16816<T>(acc[2 * dn], a, b[0], b[1]);
      mma16816<T>(acc[2 * dn + 1], a, b[2], b[3]);
    }
  }
}

// Writes a warp's 16 x HD accumulator tile (times the row factors) into its
// rows of a shared staging tile, as T.
template <typename T, int HD>
__device__ __forceinline__ void stage_acc(T* tile, const float (&acc)[HD / 8][4], float f0,
                                          float f1, int lane) {
  constexpr int LDS = MmaTile<HD>::LDS;
  const int g = lane >> 2;
  const int t = lane & 3;
#pragma unroll
  for (int dt = 0; dt < HD / 8; ++dt) {
    *reinterpret_cast<unsigned*>(tile + g * LDS + dt * 8 + 2 * t) =
        pack2<T>(acc[dt][0] * f0, acc[dt][1] * f0);
    *reinterpret_cast<unsigned*>(tile + (g + 8) * LDS + dt * 8 + 2 * t) =
        pack2<T>(acc[dt][2] * f1, acc[dt][3] * f1);
  }
}

template <typename T, int HD>
struct MmaFwd {
  static constexpr int BQ = 64, BK = 64, LDS = MmaTile<HD>::LDS;
  static constexpr std::size_t smem = static_cast<std::size_t>(BQ + 2 * BK) * LDS * sizeof(T);
};

// Grid (query tiles, H, B), the longest (last) query tiles first. K and V of
// a tile are loaded in two cp.async groups so that V arrives while Q K^T and
// the softmax run, and the next K while P V runs.
template <typename T, int HD>
__global__ void __maxnreg__(flash_reg_budget(HD, 255, 128, 128))
    flash_fwd_mma_kernel(const FwdArgs a) {
  using Cfg = MmaFwd<T, HD>;
  constexpr int BQ = Cfg::BQ, BK = Cfg::BK, LDS = Cfg::LDS;
  extern __shared__ uint4 smem_raw[];
  T* s_q = reinterpret_cast<T*>(smem_raw);
  T* s_k = s_q + BQ * LDS;
  T* s_v = s_k + BK * LDS;

  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int n_qt = (a.seq + BQ - 1) / BQ;
  const int qt = n_qt - 1 - static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int kvh = h / a.group;
  const int q0 = qt * BQ;
  const int q_end = min(q0 + BQ, a.seq);
  const int n_kt = (q_end - 1) / BK + 1;
  const std::int64_t tok0 = static_cast<std::int64_t>(b) * a.seq;
  const T* gq =
      static_cast<const T*>(a.q) + (tok0 + q0) * a.ldq + static_cast<std::int64_t>(h) * HD;
  const T* gk = static_cast<const T*>(a.k) + tok0 * a.ldk + static_cast<std::int64_t>(kvh) * HD;
  const T* gv = static_cast<const T*>(a.v) + tok0 * a.ldv + static_cast<std::int64_t>(kvh) * HD;

  load_tile<T, BQ, HD, LDS>(s_q, gq, a.ldq, q_end - q0, a.vec);
  load_tile<T, BK, HD, LDS>(s_k, gk, a.ldk, min(BK, a.seq), a.vec);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();

  // Q stays in registers for the whole key loop.
  unsigned qf[HD / 16][4];
  const T* s_qw = s_q + warp * 16 * LDS;
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
    ldmatrix_x4(qf[kk], s_qw + a_row(lane) * LDS + kk * 16 + a_col(lane));
  }

  float o[HD / 8][4];
#pragma unroll
  for (int i = 0; i < HD / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
  const int row0 = q0 + warp * 16 + g;
  const int row1 = row0 + 8;

  for (int kt = 0; kt < n_kt; ++kt) {
    const int k0 = kt * BK;
    if (kt > 0) {
      cp_async_wait<0>();
      __syncthreads();  // K[kt] landed; every warp is done with V[kt-1]
    }
    load_tile<T, BK, HD, LDS>(s_v, gv + k0 * a.ldv, a.ldv, min(BK, a.seq - k0), a.vec);
    cp_async_commit();

    float s[BK / 8][4];
#pragma unroll
    for (int i = 0; i < BK / 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
#pragma unroll
      for (int nn = 0; nn < BK / 16; ++nn) {
        unsigned kb[4];
        ldmatrix_x4(kb, s_k + (nn * 16 + bnk_row(lane)) * LDS + kk * 16 + bnk_col(lane));
        mma16816<T>(s[2 * nn], qf[kk], kb[0], kb[1]);
        mma16816<T>(s[2 * nn + 1], qf[kk], kb[2], kb[3]);
      }
    }

    // Online softmax over this tile (exp2 domain). Every row has key 0
    // unmasked in the first tile, so the running max is finite from then on.
    const bool diag = k0 + BK - 1 > q0;
    float mx0 = m0, mx1 = m1;
#pragma unroll
    for (int nt = 0; nt < BK / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = k0 + nt * 8 + 2 * t + e;
        float x0 = s[nt][e] * a.scale_log2;
        float x1 = s[nt][2 + e] * a.scale_log2;
        if (diag) {
          if (col > row0) x0 = -INFINITY;
          if (col > row1) x1 = -INFINITY;
        }
        s[nt][e] = x0;
        s[nt][2 + e] = x1;
        mx0 = fmaxf(mx0, x0);
        mx1 = fmaxf(mx1, x1);
      }
    }
    mx0 = quad_max(mx0);
    mx1 = quad_max(mx1);
    const float alpha0 = exp2f(m0 - mx0);
    const float alpha1 = exp2f(m1 - mx1);
    m0 = mx0;
    m1 = mx1;
    float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
    for (int nt = 0; nt < BK / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[nt][e] = exp2f(s[nt][e] - mx0);
        s[nt][2 + e] = exp2f(s[nt][2 + e] - mx1);
        rs0 += s[nt][e];
        rs1 += s[nt][2 + e];
      }
    }
    l0 = l0 * alpha0 + rs0;  // per-thread partial sums; the quad is summed at the end
    l1 = l1 * alpha1 + rs1;
#pragma unroll
    for (int dt = 0; dt < HD / 8; ++dt) {
      o[dt][0] *= alpha0;
      o[dt][1] *= alpha0;
      o[dt][2] *= alpha1;
      o[dt][3] *= alpha1;
    }

    cp_async_wait<0>();
    __syncthreads();  // V[kt] landed; every warp is done with K[kt]
    if (kt + 1 < n_kt) {
      load_tile<T, BK, HD, LDS>(s_k, gk + (k0 + BK) * a.ldk, a.ldk, min(BK, a.seq - k0 - BK),
                                a.vec);
      cp_async_commit();
    }
    mma_pb<T, HD, BK>(o, s, s_v, lane);
  }

  l0 = quad_sum(l0);
  l1 = quad_sum(l1);
  // Each warp stages through its own rows of s_q, which only it has read.
  __syncwarp();
  T* s_o = s_q + warp * 16 * LDS;
  stage_acc<T, HD>(s_o, o, 1.f / l0, 1.f / l1, lane);
  __syncwarp();
  T* go =
      static_cast<T*>(a.out) + (tok0 + q0 + warp * 16) * a.ldo + static_cast<std::int64_t>(h) * HD;
  store_warp_rows<T, HD, LDS>(go, a.ldo, s_o, q_end - (q0 + warp * 16), a.vec, lane);
  if (t == 0) {
    float* lrow = a.lse + (static_cast<std::int64_t>(b) * a.heads + h) * a.ld_lse;
    if (row0 < a.seq) lrow[row0] = (m0 + log2f(l0)) * kLn2;
    if (row1 < a.seq) lrow[row1] = (m1 + log2f(l1)) * kLn2;
  }
}

template <typename T, int HD>
struct MmaDkdv {
  // A 32-row query tile at hd 128 keeps dK, dV, S^T and dP^T in registers.
  static constexpr int BK = 64, BQ = HD == 128 ? 32 : 64, LDS = MmaTile<HD>::LDS;
  static constexpr std::size_t smem =
      static_cast<std::size_t>(2 * BK + 4 * BQ) * LDS * sizeof(T) + 4 * BQ * sizeof(float);
};

// Grid (key tiles, K, B), the first key tiles (most queries) first. Loops
// over the group's query heads and the query tiles at or after the key tile,
// with Q, dO, lse and D double-buffered. Warp w owns keys k0 + 16w .. +15:
//   S^T = K Q^T, P^T = exp2(S^T - lse), dP^T = V dO^T, dS^T = P^T (dP^T - D)
//   dV += P^T dO, dK += dS^T Q (times scale at the end).
template <typename T, int HD>
__global__ void __launch_bounds__(kFlashThreads) flash_bwd_dkdv_mma_kernel(const BwdArgs a) {
  using Cfg = MmaDkdv<T, HD>;
  constexpr int BK = Cfg::BK, BQ = Cfg::BQ, LDS = Cfg::LDS;
  extern __shared__ uint4 smem_raw[];
  T* s_k = reinterpret_cast<T*>(smem_raw);
  T* s_v = s_k + BK * LDS;
  T* s_q = s_v + BK * LDS;                                       // [2][BQ][LDS]
  T* s_do = s_q + 2 * BQ * LDS;                                  // [2][BQ][LDS]
  float* s_lse = reinterpret_cast<float*>(s_do + 2 * BQ * LDS);  // [2][BQ]
  float* s_d = s_lse + 2 * BQ;                                   // [2][BQ]

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int kt = static_cast<int>(blockIdx.x);
  const int kvh = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int k0 = kt * BK;
  const int k_valid = min(BK, a.seq - k0);
  const int n_qt = (a.seq + BQ - 1) / BQ;
  const int qt0 = k0 / BQ;  // first query tile with a query >= k0
  const int nq = n_qt - qt0;
  const int n_it = a.group * nq;
  const std::int64_t tok0 = static_cast<std::int64_t>(b) * a.seq;
  const T* gq = static_cast<const T*>(a.q) + tok0 * a.ldq;
  const T* gdo = static_cast<const T*>(a.dout) + tok0 * a.ld_dout;

  auto load_stage = [&](int it, int stage) {
    const int h = kvh * a.group + it / nq;
    const int q0 = (qt0 + it % nq) * BQ;
    const int valid = min(BQ, a.seq - q0);
    load_tile<T, BQ, HD, LDS>(s_q + stage * BQ * LDS,
                              gq + q0 * a.ldq + static_cast<std::int64_t>(h) * HD, a.ldq, valid,
                              a.vec);
    load_tile<T, BQ, HD, LDS>(s_do + stage * BQ * LDS,
                              gdo + q0 * a.ld_dout + static_cast<std::int64_t>(h) * HD, a.ld_dout,
                              valid, a.vec);
    const std::int64_t bh = static_cast<std::int64_t>(b) * a.heads + h;
    if (tid < BQ) {
      const bool ok = tid < valid;
      cp_async_4(s_lse + stage * BQ + tid, a.lse + bh * a.ld_lse + q0 + (ok ? tid : 0), ok);
    } else if (tid < 2 * BQ) {
      const int r = tid - BQ;
      const bool ok = r < valid;
      cp_async_4(s_d + stage * BQ + r, a.delta + bh * a.seq + q0 + (ok ? r : 0), ok);
    }
  };

  load_tile<T, BK, HD, LDS>(
      s_k, static_cast<const T*>(a.k) + (tok0 + k0) * a.ldk + static_cast<std::int64_t>(kvh) * HD,
      a.ldk, k_valid, a.vec);
  load_tile<T, BK, HD, LDS>(
      s_v, static_cast<const T*>(a.v) + (tok0 + k0) * a.ldv + static_cast<std::int64_t>(kvh) * HD,
      a.ldv, k_valid, a.vec);
  load_stage(0, 0);
  cp_async_commit();

  float dk[HD / 8][4], dv[HD / 8][4];
#pragma unroll
  for (int i = 0; i < HD / 8; ++i) {
    dk[i][0] = dk[i][1] = dk[i][2] = dk[i][3] = 0.f;
    dv[i][0] = dv[i][1] = dv[i][2] = dv[i][3] = 0.f;
  }
  const int key0 = k0 + warp * 16 + g;
  const int key1 = key0 + 8;
  const T* s_kw = s_k + warp * 16 * LDS;
  const T* s_vw = s_v + warp * 16 * LDS;

  for (int it = 0; it < n_it; ++it) {
    const int stage = it & 1;
    if (it + 1 < n_it) {
      load_stage(it + 1, stage ^ 1);  // that stage was released by the last iteration's barrier
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const int q0 = (qt0 + it % nq) * BQ;
    const T* cq = s_q + stage * BQ * LDS;
    const T* cdo = s_do + stage * BQ * LDS;
    const float* cl = s_lse + stage * BQ;
    const float* cd = s_d + stage * BQ;

    float st[BQ / 8][4], dpt[BQ / 8][4];
#pragma unroll
    for (int i = 0; i < BQ / 8; ++i) {
      st[i][0] = st[i][1] = st[i][2] = st[i][3] = 0.f;
      dpt[i][0] = dpt[i][1] = dpt[i][2] = dpt[i][3] = 0.f;
    }
    mma_abt<T, HD, BQ>(st, s_kw, cq, lane);
    mma_abt<T, HD, BQ>(dpt, s_vw, cdo, lane);

    // Masked: keys after the query (causal) and query rows past the end,
    // whose zero-filled lse would otherwise give P = 1.
    const bool need_mask = (k0 + BK - 1 > q0) || (q0 + BQ > a.seq);
#pragma unroll
    for (int nt = 0; nt < BQ / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int ci = nt * 8 + 2 * t + e;
        const int qi = q0 + ci;
        const float lse2 = cl[ci] * kLog2e;
        const float dd = cd[ci];
        float p0 = exp2f(fmaf(st[nt][e], a.scale_log2, -lse2));
        float p1 = exp2f(fmaf(st[nt][2 + e], a.scale_log2, -lse2));
        if (need_mask) {
          if (key0 > qi || qi >= a.seq) p0 = 0.f;
          if (key1 > qi || qi >= a.seq) p1 = 0.f;
        }
        st[nt][e] = p0;
        st[nt][2 + e] = p1;
        dpt[nt][e] = p0 * (dpt[nt][e] - dd);
        dpt[nt][2 + e] = p1 * (dpt[nt][2 + e] - dd);
      }
    }
    mma_pb<T, HD, BQ>(dv, st, cdo, lane);
    mma_pb<T, HD, BQ>(dk, dpt, cq, lane);
    __syncthreads();  // this stage is refilled by the next iteration's prefetch
  }

  // Each warp stages through its own rows of s_k / s_v, which only it has read.
  T* s_dk = s_k + warp * 16 * LDS;
  T* s_dv = s_v + warp * 16 * LDS;
  stage_acc<T, HD>(s_dk, dk, a.scale, a.scale, lane);
  stage_acc<T, HD>(s_dv, dv, 1.f, 1.f, lane);
  __syncwarp();
  const std::int64_t row = tok0 + k0 + warp * 16;
  const int valid = k_valid - warp * 16;
  store_warp_rows<T, HD, LDS>(
      static_cast<T*>(a.dk) + row * a.ld_dk + static_cast<std::int64_t>(kvh) * HD, a.ld_dk, s_dk,
      valid, a.vec, lane);
  store_warp_rows<T, HD, LDS>(
      static_cast<T*>(a.dv) + row * a.ld_dv + static_cast<std::int64_t>(kvh) * HD, a.ld_dv, s_dv,
      valid, a.vec, lane);
}

template <typename T, int HD>
struct MmaDq {
  static constexpr int BQ = 64, BK = 64, LDS = MmaTile<HD>::LDS;
  static constexpr std::size_t smem = static_cast<std::size_t>(2 * BQ + 4 * BK) * LDS * sizeof(T);
};

// Grid (query tiles, H, B), longest first. Q and dO stay in shared memory;
// K and V are double-buffered. Warp w owns query rows q0 + 16w .. +15:
//   S = Q K^T, P = exp2(S - lse), dP = dO V^T, dS = P (dP - D), dQ += dS K.
template <typename T, int HD>
__global__ void __maxnreg__(flash_reg_budget(HD, 255, 168, 128))
    flash_bwd_dq_mma_kernel(const BwdArgs a) {
  using Cfg = MmaDq<T, HD>;
  constexpr int BQ = Cfg::BQ, BK = Cfg::BK, LDS = Cfg::LDS;
  extern __shared__ uint4 smem_raw[];
  T* s_q = reinterpret_cast<T*>(smem_raw);
  T* s_do = s_q + BQ * LDS;
  T* s_k = s_do + BQ * LDS;     // [2][BK][LDS]
  T* s_v = s_k + 2 * BK * LDS;  // [2][BK][LDS]

  const int warp = static_cast<int>(threadIdx.x) >> 5;
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2;
  const int t = lane & 3;
  const int n_qt = (a.seq + BQ - 1) / BQ;
  const int qt = n_qt - 1 - static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int kvh = h / a.group;
  const int q0 = qt * BQ;
  const int q_end = min(q0 + BQ, a.seq);
  const int n_kt = (q_end - 1) / BK + 1;
  const std::int64_t tok0 = static_cast<std::int64_t>(b) * a.seq;
  const T* gk = static_cast<const T*>(a.k) + tok0 * a.ldk + static_cast<std::int64_t>(kvh) * HD;
  const T* gv = static_cast<const T*>(a.v) + tok0 * a.ldv + static_cast<std::int64_t>(kvh) * HD;

  load_tile<T, BQ, HD, LDS>(
      s_q, static_cast<const T*>(a.q) + (tok0 + q0) * a.ldq + static_cast<std::int64_t>(h) * HD,
      a.ldq, q_end - q0, a.vec);
  load_tile<T, BQ, HD, LDS>(
      s_do,
      static_cast<const T*>(a.dout) + (tok0 + q0) * a.ld_dout + static_cast<std::int64_t>(h) * HD,
      a.ld_dout, q_end - q0, a.vec);
  load_tile<T, BK, HD, LDS>(s_k, gk, a.ldk, min(BK, a.seq), a.vec);
  load_tile<T, BK, HD, LDS>(s_v, gv, a.ldv, min(BK, a.seq), a.vec);
  cp_async_commit();

  const int row0 = q0 + warp * 16 + g;
  const int row1 = row0 + 8;
  const std::int64_t bh = static_cast<std::int64_t>(b) * a.heads + h;
  // Rows past the end get lse 0 and D 0: their P is finite and never stored.
  const float lse2_0 = row0 < a.seq ? a.lse[bh * a.ld_lse + row0] * kLog2e : 0.f;
  const float lse2_1 = row1 < a.seq ? a.lse[bh * a.ld_lse + row1] * kLog2e : 0.f;
  const float d0 = row0 < a.seq ? a.delta[bh * a.seq + row0] : 0.f;
  const float d1 = row1 < a.seq ? a.delta[bh * a.seq + row1] : 0.f;

  float dq[HD / 8][4];
#pragma unroll
  for (int i = 0; i < HD / 8; ++i) dq[i][0] = dq[i][1] = dq[i][2] = dq[i][3] = 0.f;
  const T* s_qw = s_q + warp * 16 * LDS;
  const T* s_dow = s_do + warp * 16 * LDS;

  for (int kt = 0; kt < n_kt; ++kt) {
    const int stage = kt & 1;
    const int k0 = kt * BK;
    if (kt + 1 < n_kt) {
      const int k1 = k0 + BK;
      load_tile<T, BK, HD, LDS>(s_k + (stage ^ 1) * BK * LDS, gk + k1 * a.ldk, a.ldk,
                                min(BK, a.seq - k1), a.vec);
      load_tile<T, BK, HD, LDS>(s_v + (stage ^ 1) * BK * LDS, gv + k1 * a.ldv, a.ldv,
                                min(BK, a.seq - k1), a.vec);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const T* ck = s_k + stage * BK * LDS;
    const T* cv = s_v + stage * BK * LDS;

    float s[BK / 8][4], dp[BK / 8][4];
#pragma unroll
    for (int i = 0; i < BK / 8; ++i) {
      s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
      dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.f;
    }
    mma_abt<T, HD, BK>(s, s_qw, ck, lane);
    mma_abt<T, HD, BK>(dp, s_dow, cv, lane);

    const bool diag = k0 + BK - 1 > q0;
#pragma unroll
    for (int nt = 0; nt < BK / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = k0 + nt * 8 + 2 * t + e;
        float p0 = exp2f(fmaf(s[nt][e], a.scale_log2, -lse2_0));
        float p1 = exp2f(fmaf(s[nt][2 + e], a.scale_log2, -lse2_1));
        if (diag) {
          if (col > row0) p0 = 0.f;
          if (col > row1) p1 = 0.f;
        }
        s[nt][e] = p0 * (dp[nt][e] - d0);  // dS, in place of S
        s[nt][2 + e] = p1 * (dp[nt][2 + e] - d1);
      }
    }
    mma_pb<T, HD, BK>(dq, s, ck, lane);
    __syncthreads();  // this stage is refilled by the next iteration's prefetch
  }

  T* s_dq = s_q + warp * 16 * LDS;  // the warp's own rows, read only by it
  stage_acc<T, HD>(s_dq, dq, a.scale, a.scale, lane);
  __syncwarp();
  store_warp_rows<T, HD, LDS>(
      static_cast<T*>(a.dq) + (tok0 + q0 + warp * 16) * a.ld_dq + static_cast<std::int64_t>(h) * HD,
      a.ld_dq, s_dq, q_end - (q0 + warp * 16), a.vec, lane);
}

// ================================================================================
// fp32 kernels (FMA)
// ================================================================================
//
// 128 threads = 8 row groups (rg = tid / 16) x 16 column lanes (cg = tid % 16).
// A thread owns tile rows rg*RM + i and score columns cg + 16*c; the 16 lanes
// of a row group are one half-warp, so row reductions are 4 shuffles. Shared
// row stride HD + 4 floats: the 8 different rows one float4 phase reads start
// in 8 different bank groups.

template <int HD>
struct F32Tile {
  static constexpr int LDS = HD + 4;
  // Output columns of a thread: cg*W + 16*W*j + e, float4 (or float2 at hd 32)
  // reads of V rows that cover a contiguous 64 (32) floats per half-warp.
  static constexpr int W = HD / 16 >= 4 ? 4 : HD / 16;
  static constexpr int J = HD / 16 / W;
  static constexpr int OC = HD / 16;  // output columns per thread
};

__device__ __forceinline__ float half_warp_max(float x) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

__device__ __forceinline__ float half_warp_sum(float x) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// acc[i][c] += A[rg*RM + i] . B[cg + 16c] over HD (both row stride LDS).
template <int RM, int CN, int HD>
__device__ __forceinline__ void f32_abt(float (&acc)[RM][CN], const float* A, const float* B,
                                        int rg, int cg) {
  constexpr int LDS = F32Tile<HD>::LDS;
#pragma unroll 4
  for (int d = 0; d < HD; d += 4) {
    float4 x[RM], y[CN];
#pragma unroll
    for (int i = 0; i < RM; ++i)
      x[i] = *reinterpret_cast<const float4*>(A + (rg * RM + i) * LDS + d);
#pragma unroll
    for (int c = 0; c < CN; ++c) {
      y[c] = *reinterpret_cast<const float4*>(B + (cg + 16 * c) * LDS + d);
    }
#pragma unroll
    for (int i = 0; i < RM; ++i) {
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        float s = acc[i][c];
        s = fmaf(x[i].x, y[c].x, s);
        s = fmaf(x[i].y, y[c].y, s);
        s = fmaf(x[i].z, y[c].z, s);
        s = fmaf(x[i].w, y[c].w, s);
        acc[i][c] = s;
      }
    }
  }
}

// acc[i][*] += P[rg*RM + i][0..NC) * B[0..NC)[thread's columns]; P row stride
// LDP, B row stride HD + 4.
template <int RM, int HD, int NC, int LDP>
__device__ __forceinline__ void f32_pb(float (&acc)[RM][F32Tile<HD>::OC], const float* P,
                                       const float* B, int rg, int cg) {
  using Tl = F32Tile<HD>;
  constexpr int LDS = Tl::LDS, W = Tl::W, J = Tl::J;
#pragma unroll 2
  for (int c = 0; c < NC; c += 4) {
    float4 p[RM];
#pragma unroll
    for (int i = 0; i < RM; ++i)
      p[i] = *reinterpret_cast<const float4*>(P + (rg * RM + i) * LDP + c);
#pragma unroll
    for (int cc = 0; cc < 4; ++cc) {
      float bv[Tl::OC];
#pragma unroll
      for (int j = 0; j < J; ++j) {
        const float* src = B + (c + cc) * LDS + cg * W + 16 * W * j;
        if constexpr (W == 4) {
          const float4 v = *reinterpret_cast<const float4*>(src);
          bv[j * 4 + 0] = v.x;
          bv[j * 4 + 1] = v.y;
          bv[j * 4 + 2] = v.z;
          bv[j * 4 + 3] = v.w;
        } else {
          const float2 v = *reinterpret_cast<const float2*>(src);
          bv[j * 2 + 0] = v.x;
          bv[j * 2 + 1] = v.y;
        }
      }
#pragma unroll
      for (int i = 0; i < RM; ++i) {
        const float pv = cc == 0 ? p[i].x : cc == 1 ? p[i].y : cc == 2 ? p[i].z : p[i].w;
#pragma unroll
        for (int n = 0; n < Tl::OC; ++n) acc[i][n] = fmaf(pv, bv[n], acc[i][n]);
      }
    }
  }
}

// Stores a thread's RM x OC accumulator rows (times f) where row < valid.
template <int RM, int HD>
__device__ __forceinline__ void f32_store_rows(float* dst, std::int64_t ld,
                                               const float (&acc)[RM][F32Tile<HD>::OC],
                                               const float (&f)[RM], int rg, int cg, int valid,
                                               bool vec) {
  using Tl = F32Tile<HD>;
  constexpr int W = Tl::W;
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int r = rg * RM + i;
    if (r >= valid) continue;
    float* row = dst + r * ld;
#pragma unroll
    for (int j = 0; j < Tl::J; ++j) {
      float* p = row + cg * W + 16 * W * j;
      if constexpr (W == 4) {
        if (vec) {
          *reinterpret_cast<float4*>(p) =
              make_float4(acc[i][j * 4] * f[i], acc[i][j * 4 + 1] * f[i], acc[i][j * 4 + 2] * f[i],
                          acc[i][j * 4 + 3] * f[i]);
          continue;
        }
      }
#pragma unroll
      for (int e = 0; e < W; ++e) p[e] = acc[i][j * W + e] * f[i];
    }
  }
}

template <int HD>
struct F32Fwd {
  static constexpr int BQ = 32, BK = 64, RM = 4, CN = 4, LDS = F32Tile<HD>::LDS, LDP = BK + 4;
  static constexpr std::size_t smem =
      (static_cast<std::size_t>(BQ + 2 * BK) * LDS + BQ * LDP) * sizeof(float);
};

template <int HD>
__global__ void __launch_bounds__(kFlashThreads) flash_fwd_f32_kernel(const FwdArgs a) {
  using Cfg = F32Fwd<HD>;
  constexpr int BQ = Cfg::BQ, BK = Cfg::BK, RM = Cfg::RM, CN = Cfg::CN, LDS = Cfg::LDS,
                LDP = Cfg::LDP, OC = F32Tile<HD>::OC;
  extern __shared__ uint4 smem_raw[];
  float* s_q = reinterpret_cast<float*>(smem_raw);
  float* s_k = s_q + BQ * LDS;
  float* s_v = s_k + BK * LDS;
  float* s_p = s_v + BK * LDS;

  const int tid = static_cast<int>(threadIdx.x);
  const int rg = tid >> 4;
  const int cg = tid & 15;
  const int n_qt = (a.seq + BQ - 1) / BQ;
  const int qt = n_qt - 1 - static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int kvh = h / a.group;
  const int q0 = qt * BQ;
  const int q_end = min(q0 + BQ, a.seq);
  const int n_kt = (q_end - 1) / BK + 1;
  const std::int64_t tok0 = static_cast<std::int64_t>(b) * a.seq;
  const float* gk =
      static_cast<const float*>(a.k) + tok0 * a.ldk + static_cast<std::int64_t>(kvh) * HD;
  const float* gv =
      static_cast<const float*>(a.v) + tok0 * a.ldv + static_cast<std::int64_t>(kvh) * HD;

  load_tile<float, BQ, HD, LDS>(
      s_q, static_cast<const float*>(a.q) + (tok0 + q0) * a.ldq + static_cast<std::int64_t>(h) * HD,
      a.ldq, q_end - q0, a.vec);

  float o[RM][OC];
  float m[RM], l[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int n = 0; n < OC; ++n) o[i][n] = 0.f;
  }

  for (int kt = 0; kt < n_kt; ++kt) {
    const int k0 = kt * BK;
    const int kv = min(BK, a.seq - k0);
    load_tile<float, BK, HD, LDS>(s_k, gk + k0 * a.ldk, a.ldk, kv, a.vec);
    load_tile<float, BK, HD, LDS>(s_v, gv + k0 * a.ldv, a.ldv, kv, a.vec);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    float s[RM][CN];
#pragma unroll
    for (int i = 0; i < RM; ++i) {
#pragma unroll
      for (int c = 0; c < CN; ++c) s[i][c] = 0.f;
    }
    f32_abt<RM, CN, HD>(s, s_q, s_k, rg, cg);

    const bool diag = k0 + BK - 1 > q0;
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int row = q0 + rg * RM + i;
      float mx = m[i];
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        float x = s[i][c] * a.scale_log2;
        if (diag && k0 + cg + 16 * c > row) x = -INFINITY;
        s[i][c] = x;
        mx = fmaxf(mx, x);
      }
      mx = half_warp_max(mx);  // finite: key 0 is never masked
      const float alpha = exp2f(m[i] - mx);
      m[i] = mx;
      float rs = 0.f;
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        const float p = exp2f(s[i][c] - mx);
        s_p[(rg * RM + i) * LDP + cg + 16 * c] = p;
        rs += p;
      }
      l[i] = l[i] * alpha + rs;
#pragma unroll
      for (int n = 0; n < OC; ++n) o[i][n] *= alpha;
    }
    __syncthreads();
    f32_pb<RM, HD, BK, LDP>(o, s_p, s_v, rg, cg);
    __syncthreads();  // K, V and P are overwritten by the next tile
  }

  float inv[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    l[i] = half_warp_sum(l[i]);
    inv[i] = 1.f / l[i];
  }
  f32_store_rows<RM, HD>(
      static_cast<float*>(a.out) + (tok0 + q0) * a.ldo + static_cast<std::int64_t>(h) * HD, a.ldo,
      o, inv, rg, cg, q_end - q0, a.vec);
  if (cg == 0) {
    float* lrow = a.lse + (static_cast<std::int64_t>(b) * a.heads + h) * a.ld_lse;
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int row = q0 + rg * RM + i;
      if (row < a.seq) lrow[row] = (m[i] + log2f(l[i])) * kLn2;
    }
  }
}

template <int HD>
struct F32Dkdv {
  // Keys are the rows (RM per thread); query columns CN per thread.
  static constexpr int BK = 32, BQ = HD == 128 ? 32 : 64, RM = 4, CN = BQ / 16,
                       LDS = F32Tile<HD>::LDS, LDP = BQ + 4;
  static constexpr std::size_t smem =
      (static_cast<std::size_t>(2 * BK + 2 * BQ) * LDS + 2 * BK * LDP + 2 * BQ) * sizeof(float);
};

template <int HD>
__global__ void __maxnreg__(flash_reg_budget(HD, 200, 168, 128))
    flash_bwd_dkdv_f32_kernel(const BwdArgs a) {
  using Cfg = F32Dkdv<HD>;
  constexpr int BK = Cfg::BK, BQ = Cfg::BQ, RM = Cfg::RM, CN = Cfg::CN, LDS = Cfg::LDS,
                LDP = Cfg::LDP, OC = F32Tile<HD>::OC;
  extern __shared__ uint4 smem_raw[];
  float* s_k = reinterpret_cast<float*>(smem_raw);
  float* s_v = s_k + BK * LDS;
  float* s_q = s_v + BK * LDS;
  float* s_do = s_q + BQ * LDS;
  float* s_p = s_do + BQ * LDS;    // [BK][LDP]
  float* s_ds = s_p + BK * LDP;    // [BK][LDP]
  float* s_lse = s_ds + BK * LDP;  // [BQ], exp2 domain
  float* s_d = s_lse + BQ;         // [BQ]

  const int tid = static_cast<int>(threadIdx.x);
  const int rg = tid >> 4;
  const int cg = tid & 15;
  const int kt = static_cast<int>(blockIdx.x);
  const int kvh = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int k0 = kt * BK;
  const int k_valid = min(BK, a.seq - k0);
  const int n_qt = (a.seq + BQ - 1) / BQ;
  const int qt0 = k0 / BQ;
  const int nq = n_qt - qt0;
  const int n_it = a.group * nq;
  const std::int64_t tok0 = static_cast<std::int64_t>(b) * a.seq;

  load_tile<float, BK, HD, LDS>(
      s_k,
      static_cast<const float*>(a.k) + (tok0 + k0) * a.ldk + static_cast<std::int64_t>(kvh) * HD,
      a.ldk, k_valid, a.vec);
  load_tile<float, BK, HD, LDS>(
      s_v,
      static_cast<const float*>(a.v) + (tok0 + k0) * a.ldv + static_cast<std::int64_t>(kvh) * HD,
      a.ldv, k_valid, a.vec);

  float dk[RM][OC], dv[RM][OC];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
#pragma unroll
    for (int n = 0; n < OC; ++n) dk[i][n] = dv[i][n] = 0.f;
  }

  for (int it = 0; it < n_it; ++it) {
    const int h = kvh * a.group + it / nq;
    const int q0 = (qt0 + it % nq) * BQ;
    const int valid = min(BQ, a.seq - q0);
    load_tile<float, BQ, HD, LDS>(
        s_q,
        static_cast<const float*>(a.q) + (tok0 + q0) * a.ldq + static_cast<std::int64_t>(h) * HD,
        a.ldq, valid, a.vec);
    load_tile<float, BQ, HD, LDS>(s_do,
                                  static_cast<const float*>(a.dout) + (tok0 + q0) * a.ld_dout +
                                      static_cast<std::int64_t>(h) * HD,
                                  a.ld_dout, valid, a.vec);
    cp_async_commit();
    const std::int64_t bh = static_cast<std::int64_t>(b) * a.heads + h;
    if (tid < BQ) {
      s_lse[tid] = tid < valid ? a.lse[bh * a.ld_lse + q0 + tid] * kLog2e : 0.f;
    } else if (tid < 2 * BQ) {
      const int r = tid - BQ;
      s_d[r] = r < valid ? a.delta[bh * a.seq + q0 + r] : 0.f;
    }
    cp_async_wait<0>();
    __syncthreads();

    float st[RM][CN], dpt[RM][CN];
#pragma unroll
    for (int i = 0; i < RM; ++i) {
#pragma unroll
      for (int c = 0; c < CN; ++c) st[i][c] = dpt[i][c] = 0.f;
    }
    f32_abt<RM, CN, HD>(st, s_k, s_q, rg, cg);
    f32_abt<RM, CN, HD>(dpt, s_v, s_do, rg, cg);

    const bool need_mask = (k0 + BK - 1 > q0) || (q0 + BQ > a.seq);
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int key = k0 + rg * RM + i;
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        const int ci = cg + 16 * c;
        const int qi = q0 + ci;
        float p = exp2f(fmaf(st[i][c], a.scale_log2, -s_lse[ci]));
        if (need_mask && (key > qi || qi >= a.seq)) p = 0.f;
        s_p[(rg * RM + i) * LDP + ci] = p;
        s_ds[(rg * RM + i) * LDP + ci] = p * (dpt[i][c] - s_d[ci]);
      }
    }
    __syncthreads();
    f32_pb<RM, HD, BQ, LDP>(dv, s_p, s_do, rg, cg);
    f32_pb<RM, HD, BQ, LDP>(dk, s_ds, s_q, rg, cg);
    __syncthreads();  // Q, dO, lse, D, P and dS are overwritten by the next tile
  }

  const std::int64_t row0 = tok0 + k0;
  float fk[RM], fv[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    fk[i] = a.scale;
    fv[i] = 1.f;
  }
  f32_store_rows<RM, HD>(
      static_cast<float*>(a.dk) + row0 * a.ld_dk + static_cast<std::int64_t>(kvh) * HD, a.ld_dk, dk,
      fk, rg, cg, k_valid, a.vec);
  f32_store_rows<RM, HD>(
      static_cast<float*>(a.dv) + row0 * a.ld_dv + static_cast<std::int64_t>(kvh) * HD, a.ld_dv, dv,
      fv, rg, cg, k_valid, a.vec);
}

template <int HD>
struct F32Dq {
  static constexpr int BQ = 32, BK = 64, RM = 4, CN = 4, LDS = F32Tile<HD>::LDS, LDP = BK + 4;
  static constexpr std::size_t smem =
      (static_cast<std::size_t>(2 * BQ + 2 * BK) * LDS + BQ * LDP) * sizeof(float);
};

template <int HD>
__global__ void __launch_bounds__(kFlashThreads) flash_bwd_dq_f32_kernel(const BwdArgs a) {
  using Cfg = F32Dq<HD>;
  constexpr int BQ = Cfg::BQ, BK = Cfg::BK, RM = Cfg::RM, CN = Cfg::CN, LDS = Cfg::LDS,
                LDP = Cfg::LDP, OC = F32Tile<HD>::OC;
  extern __shared__ uint4 smem_raw[];
  float* s_q = reinterpret_cast<float*>(smem_raw);
  float* s_do = s_q + BQ * LDS;
  float* s_k = s_do + BQ * LDS;
  float* s_v = s_k + BK * LDS;
  float* s_ds = s_v + BK * LDS;

  const int tid = static_cast<int>(threadIdx.x);
  const int rg = tid >> 4;
  const int cg = tid & 15;
  const int n_qt = (a.seq + BQ - 1) / BQ;
  const int qt = n_qt - 1 - static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int kvh = h / a.group;
  const int q0 = qt * BQ;
  const int q_end = min(q0 + BQ, a.seq);
  const int n_kt = (q_end - 1) / BK + 1;
  const std::int64_t tok0 = static_cast<std::int64_t>(b) * a.seq;
  const float* gk =
      static_cast<const float*>(a.k) + tok0 * a.ldk + static_cast<std::int64_t>(kvh) * HD;
  const float* gv =
      static_cast<const float*>(a.v) + tok0 * a.ldv + static_cast<std::int64_t>(kvh) * HD;

  load_tile<float, BQ, HD, LDS>(
      s_q, static_cast<const float*>(a.q) + (tok0 + q0) * a.ldq + static_cast<std::int64_t>(h) * HD,
      a.ldq, q_end - q0, a.vec);
  load_tile<float, BQ, HD, LDS>(s_do,
                                static_cast<const float*>(a.dout) + (tok0 + q0) * a.ld_dout +
                                    static_cast<std::int64_t>(h) * HD,
                                a.ld_dout, q_end - q0, a.vec);

  const std::int64_t bh = static_cast<std::int64_t>(b) * a.heads + h;
  float lse2[RM], dd[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int row = q0 + rg * RM + i;
    lse2[i] = row < a.seq ? a.lse[bh * a.ld_lse + row] * kLog2e : 0.f;
    dd[i] = row < a.seq ? a.delta[bh * a.seq + row] : 0.f;
  }
  float dq[RM][OC];
#pragma unroll
  for (int i = 0; i < RM; ++i) {
#pragma unroll
    for (int n = 0; n < OC; ++n) dq[i][n] = 0.f;
  }

  for (int kt = 0; kt < n_kt; ++kt) {
    const int k0 = kt * BK;
    const int kv = min(BK, a.seq - k0);
    load_tile<float, BK, HD, LDS>(s_k, gk + k0 * a.ldk, a.ldk, kv, a.vec);
    load_tile<float, BK, HD, LDS>(s_v, gv + k0 * a.ldv, a.ldv, kv, a.vec);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    float s[RM][CN], dp[RM][CN];
#pragma unroll
    for (int i = 0; i < RM; ++i) {
#pragma unroll
      for (int c = 0; c < CN; ++c) s[i][c] = dp[i][c] = 0.f;
    }
    f32_abt<RM, CN, HD>(s, s_q, s_k, rg, cg);
    f32_abt<RM, CN, HD>(dp, s_do, s_v, rg, cg);

    const bool diag = k0 + BK - 1 > q0;
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int row = q0 + rg * RM + i;
#pragma unroll
      for (int c = 0; c < CN; ++c) {
        float p = exp2f(fmaf(s[i][c], a.scale_log2, -lse2[i]));
        if (diag && k0 + cg + 16 * c > row) p = 0.f;
        s_ds[(rg * RM + i) * LDP + cg + 16 * c] = p * (dp[i][c] - dd[i]);
      }
    }
    __syncthreads();
    f32_pb<RM, HD, BK, LDP>(dq, s_ds, s_k, rg, cg);
    __syncthreads();  // K, V and dS are overwritten by the next tile
  }

  float f[RM];
#pragma unroll
  for (int i = 0; i < RM; ++i) f[i] = a.scale;
  f32_store_rows<RM, HD>(
      static_cast<float*>(a.dq) + (tok0 + q0) * a.ld_dq + static_cast<std::int64_t>(h) * HD,
      a.ld_dq, dq, f, rg, cg, q_end - q0, a.vec);
}

// ================================================================================
// D = rowsum(dO * O), the softmax backward's correction, once per query row
// ================================================================================

constexpr int kDeltaWarps = 8;

// One warp per (token, head); delta is [B*H, S].
template <typename T>
__global__ void flash_bwd_delta_kernel(float* __restrict__ delta, const T* __restrict__ dout,
                                       std::int64_t ld_dout, const T* __restrict__ out,
                                       std::int64_t ld_out, int seq, int heads, int hd,
                                       std::int64_t rows) {
  const std::int64_t r = blockIdx.x * static_cast<std::int64_t>(kDeltaWarps) + (threadIdx.x >> 5);
  if (r >= rows) return;  // whole warps leave together
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int h = static_cast<int>(r % heads);
  const std::int64_t token = r / heads;
  const T* g = dout + token * ld_dout + static_cast<std::int64_t>(h) * hd;
  const T* o = out + token * ld_out + static_cast<std::int64_t>(h) * hd;
  float acc = 0.f;
  for (int d = lane; d < hd; d += 32) acc += to_f32(g[d]) * to_f32(o[d]);
  acc = warp_sum(acc);
  if (lane == 0) {
    const std::int64_t b = token / seq;
    const int s = static_cast<int>(token % seq);
    delta[(b * heads + h) * seq + s] = acc;
  }
}

// The same with 16-byte loads, for 16-byte aligned rows: G = HD / Vec lanes
// share one (token, head) row and reduce it with G-lane shuffles, 32 / G rows
// a warp. (The one-warp-per-row kernel reads 2 bytes per lane per load and
// ran at a third of the memory bandwidth at B32 S1024.)
template <typename T, int HD>
__global__ void flash_bwd_delta_vec_kernel(float* __restrict__ delta, const T* __restrict__ dout,
                                           std::int64_t ld_dout, const T* __restrict__ out,
                                           std::int64_t ld_out, int seq, int heads,
                                           std::int64_t rows) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  constexpr int kLanesPerRow = HD / kVec;
  static_assert(kLanesPerRow >= 1 && kLanesPerRow <= 32 && 32 % kLanesPerRow == 0,
                "a row must be a power-of-two share of a warp");
  const std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t r = t / kLanesPerRow;
  const int part = static_cast<int>(t % kLanesPerRow);
  float acc = 0.f;
  if (r < rows) {  // no early exit: every lane takes part in the shuffles
    const int h = static_cast<int>(r % heads);
    const std::int64_t token = r / heads;
    float g[kVec], o[kVec];
    load_f32<kVec>(dout + token * ld_dout + static_cast<std::int64_t>(h) * HD + part * kVec, g);
    load_f32<kVec>(out + token * ld_out + static_cast<std::int64_t>(h) * HD + part * kVec, o);
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc += g[e] * o[e];
  }
#pragma unroll
  for (int width = kLanesPerRow / 2; width > 0; width /= 2) {
    acc += __shfl_xor_sync(0xffffffffu, acc, width);
  }
  if (r < rows && part == 0) {
    const std::int64_t token = r / heads;
    const int h = static_cast<int>(r % heads);
    delta[(token / seq * heads + h) * seq + token % seq] = acc;
  }
}

// ================================================================================
// Host side
// ================================================================================

// Opting in to more than 48 KiB of dynamic shared memory is per kernel; once
// per instantiation is enough (a failure throws and is retried next call).
template <auto Kernel>
void allow_smem(std::size_t bytes) {
  static const bool done = [bytes] {
    CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(bytes)));
    return true;
  }();
  (void)done;
}

template <auto Kernel, typename Args>
void launch(dim3 grid, std::size_t smem, const Args& args, cudaStream_t stream) {
  allow_smem<Kernel>(smem);
  Kernel<<<grid, kFlashThreads, smem, stream>>>(args);
  CUDA_CHECK_LAUNCH();
}

template <typename Fn>
void dispatch_head_dim(int hd, const char* op, Fn&& fn) {
  switch (hd) {
    case 32:
      fn(std::integral_constant<int, 32>{});
      return;
    case 64:
      fn(std::integral_constant<int, 64>{});
      return;
    case 128:
      fn(std::integral_constant<int, 128>{});
      return;
    default:
      break;
  }
  throw RuntimeFailure(std::string(op) + ": flash attention on CUDA supports head_dim 32, 64 or " +
                       "128, got " + std::to_string(hd) + " (use --disable-flash-attention)");
}

bool aligned16(const Mat& m) {
  return reinterpret_cast<std::uintptr_t>(m.data) % 16 == 0 &&
         (m.ld * static_cast<std::int64_t>(dtype_size(m.dtype))) % 16 == 0;
}

struct FlashDims {
  int batch, seq, heads, kv_heads, hd, group;
};

FlashDims check_flash(const char* name, const AttentionShape& s, Mat q, Mat k, Mat v, Mat out,
                      Mat lse) {
  require(s.batch > 0 && s.seq > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0, name,
          "attention shape must be positive");
  require(s.heads % s.kv_heads == 0, name, "heads must be a multiple of kv_heads");
  require(s.batch <= 65535 && s.heads <= 65535, name, "batch and heads must be at most 65535");
  const std::int64_t tokens = static_cast<std::int64_t>(s.batch) * s.seq;
  const std::int64_t qw = static_cast<std::int64_t>(s.heads) * s.head_dim;
  const std::int64_t kw = static_cast<std::int64_t>(s.kv_heads) * s.head_dim;
  require(q.rows == tokens && q.cols == qw, name, "q " + shape_str(q) + " does not match shape");
  require(out.rows == tokens && out.cols == qw, name, "out " + shape_str(out) + " does not match");
  require(k.rows == tokens && k.cols == kw, name, "k " + shape_str(k) + " does not match shape");
  require(v.rows == tokens && v.cols == kw, name, "v " + shape_str(v) + " does not match shape");
  require(lse.rows == static_cast<std::int64_t>(s.batch) * s.heads && lse.cols == s.seq, name,
          "lse must be [B*H, S], got " + shape_str(lse));
  require_dtype(name, lse, DType::F32);
  for (const Mat* m : {&k, &v, &out}) {
    require(m->dtype == q.dtype, name, "q, k, v and out must share one dtype");
  }
  return FlashDims{s.batch, s.seq, s.heads, s.kv_heads, s.head_dim, s.heads / s.kv_heads};
}

unsigned tiles(int seq, int tile) {
  return static_cast<unsigned>((seq + tile - 1) / tile);
}

}  // namespace

std::int64_t flash_attention_scratch_bytes(const AttentionShape& s) {
  return static_cast<std::int64_t>(s.batch) * s.heads * s.seq *
         static_cast<std::int64_t>(sizeof(float));
}

AttentionScratch flash_attention_scratch(void* base, const AttentionShape& s, DType dtype) {
  AttentionScratch scratch;
  scratch.dtype = dtype;
  // No head or score buffers; head_elems keeps v1's meaning for delta's
  // capacity (head_elems / head_dim rows), which the backward checks.
  scratch.head_elems = static_cast<std::int64_t>(s.batch) * s.heads * s.seq * s.head_dim;
  scratch.score_elems = 0;
  scratch.delta = static_cast<float*>(base);
  return scratch;
}

void flash_attention_forward(Mat out, Mat lse, Mat q, Mat k, Mat v, const AttentionShape& shape,
                             cudaStream_t stream) {
  const char* name = "attention_forward (flash)";
  const FlashDims d = check_flash(name, shape, q, k, v, out, lse);
  FwdArgs args{};
  args.q = q.data;
  args.k = k.data;
  args.v = v.data;
  args.out = out.data;
  args.lse = lse.ptr<float>();
  args.ldq = q.ld;
  args.ldk = k.ld;
  args.ldv = v.ld;
  args.ldo = out.ld;
  args.ld_lse = lse.ld;
  args.seq = d.seq;
  args.heads = d.heads;
  args.group = d.group;
  args.scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(d.hd)));
  args.vec = aligned16(q) && aligned16(k) && aligned16(v) && aligned16(out);
  dispatch_head_dim(d.hd, name, [&](auto hd_tag) {
    constexpr int HD = decltype(hd_tag)::value;
    dispatch_float(q.dtype, name, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, float>) {
        using Cfg = F32Fwd<HD>;
        launch<flash_fwd_f32_kernel<HD>>(dim3(tiles(d.seq, Cfg::BQ), d.heads, d.batch), Cfg::smem,
                                         args, stream);
      } else {
        using Cfg = MmaFwd<T, HD>;
        launch<flash_fwd_mma_kernel<T, HD>>(dim3(tiles(d.seq, Cfg::BQ), d.heads, d.batch),
                                            Cfg::smem, args, stream);
      }
    });
  });
}

void flash_attention_backward(const AttentionScratch& scratch, Mat dq, Mat dk, Mat dv, Mat dout,
                              Mat q, Mat k, Mat v, Mat out, Mat lse, const AttentionShape& shape,
                              cudaStream_t stream) {
  const char* name = "attention_backward (flash)";
  const FlashDims d = check_flash(name, shape, q, k, v, out, lse);
  require(dq.rows == q.rows && dq.cols == q.cols && dout.rows == q.rows && dout.cols == q.cols,
          name, "dq and dout must match q");
  require(dk.rows == k.rows && dk.cols == k.cols && dv.rows == v.rows && dv.cols == v.cols, name,
          "dk and dv must match k and v");
  for (const Mat* m : {&dq, &dk, &dv, &dout}) {
    require(m->dtype == q.dtype, name, "gradients must share q's dtype");
  }
  const std::int64_t rows = static_cast<std::int64_t>(d.batch) * d.heads * d.seq;
  require(scratch.delta != nullptr && scratch.head_elems >= rows * d.hd, name,
          "attention scratch was not prepared for this shape (call prepare())");

  BwdArgs args{};
  args.q = q.data;
  args.k = k.data;
  args.v = v.data;
  args.dout = dout.data;
  args.dq = dq.data;
  args.dk = dk.data;
  args.dv = dv.data;
  args.lse = lse.ptr<const float>();
  args.delta = scratch.delta;
  args.ldq = q.ld;
  args.ldk = k.ld;
  args.ldv = v.ld;
  args.ld_dout = dout.ld;
  args.ld_dq = dq.ld;
  args.ld_dk = dk.ld;
  args.ld_dv = dv.ld;
  args.ld_lse = lse.ld;
  args.seq = d.seq;
  args.heads = d.heads;
  args.group = d.group;
  args.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.hd)));
  args.scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(d.hd)));
  args.vec = aligned16(q) && aligned16(k) && aligned16(v) && aligned16(dout) && aligned16(dq) &&
             aligned16(dk) && aligned16(dv);

  dispatch_head_dim(d.hd, name, [&](auto hd_tag) {
    constexpr int HD = decltype(hd_tag)::value;
    dispatch_float(q.dtype, name, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (args.vec && aligned16(out)) {
        constexpr int kThreads = kDeltaWarps * 32;
        const std::int64_t threads = rows * (HD / (16 / static_cast<int>(sizeof(T))));
        flash_bwd_delta_vec_kernel<T, HD>
            <<<static_cast<unsigned>((threads + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
                scratch.delta, dout.ptr<const T>(), dout.ld, out.ptr<const T>(), out.ld, d.seq,
                d.heads, rows);
      } else {
        const unsigned delta_blocks = static_cast<unsigned>((rows + kDeltaWarps - 1) / kDeltaWarps);
        flash_bwd_delta_kernel<T><<<delta_blocks, kDeltaWarps * 32, 0, stream>>>(
            scratch.delta, dout.ptr<const T>(), dout.ld, out.ptr<const T>(), out.ld, d.seq, d.heads,
            d.hd, rows);
      }
      CUDA_CHECK_LAUNCH();
      if constexpr (std::is_same_v<T, float>) {
        using Kv = F32Dkdv<HD>;
        using Q = F32Dq<HD>;
        launch<flash_bwd_dkdv_f32_kernel<HD>>(dim3(tiles(d.seq, Kv::BK), d.kv_heads, d.batch),
                                              Kv::smem, args, stream);
        launch<flash_bwd_dq_f32_kernel<HD>>(dim3(tiles(d.seq, Q::BQ), d.heads, d.batch), Q::smem,
                                            args, stream);
      } else {
        using Kv = MmaDkdv<T, HD>;
        using Q = MmaDq<T, HD>;
        launch<flash_bwd_dkdv_mma_kernel<T, HD>>(dim3(tiles(d.seq, Kv::BK), d.kv_heads, d.batch),
                                                 Kv::smem, args, stream);
        launch<flash_bwd_dq_mma_kernel<T, HD>>(dim3(tiles(d.seq, Q::BQ), d.heads, d.batch), Q::smem,
                                               args, stream);
      }
    });
  });
}

}  // namespace tinyllama::cuda
