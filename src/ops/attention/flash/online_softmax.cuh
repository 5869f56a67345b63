#pragma once
// The online softmax of one score tile, for kernels whose score
// accumulators have the mma.sync / wgmma C layout (per warp 16 rows; a
// thread holds rows g and g + 8, columns nt * 8 + 2t + {0, 1} of n-tile nt):
// scales the scores into the exp2 domain, masks keys after the row where
// the tile crosses the diagonal, updates the running max and sum, and packs
// P = exp2(S - max) as the A fragments of the P V product (the C layout of
// n-tiles 2k and 2k + 1 is the A layout of k-step k).
#include <cmath>

#include "ops/attention/flash/arch.cuh"
#include "ops/attention/flash/mma_tiles.cuh"

namespace tinyllama::cuda::flash {

struct SoftmaxRows {
  float m0 = -INFINITY, m1 = -INFINITY;  // running max (exp2 domain), rows g and g + 8
  float l0 = 0.f, l1 = 0.f;              // this thread's partial sums (the quad's at the end)
};

// Returns the factors the output accumulated so far must be scaled by (in
// .x for row g, .y for row g + 8). k0: the tile's first key; row0/row1: the
// thread's rows; diag: some key of the tile lies after some row.
template <typename T, int BK>
__device__ __forceinline__ float2 softmax_tile(float (&s)[BK / 8][4], unsigned (&p)[BK / 16][4],
                                               SoftmaxRows& st, float scale_log2, bool diag, int k0,
                                               int row0, int row1, int t) {
  float mx0 = st.m0, mx1 = st.m1;
#pragma unroll
  for (int nt = 0; nt < BK / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int col = k0 + nt * 8 + 2 * t + e;
      float x0 = s[nt][e] * scale_log2;
      float x1 = s[nt][2 + e] * scale_log2;
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
  const float2 alpha = make_float2(exp2f(st.m0 - mx0), exp2f(st.m1 - mx1));
  st.m0 = mx0;
  st.m1 = mx1;
  float rs0 = 0.f, rs1 = 0.f;
#pragma unroll
  for (int nt = 0; nt < BK / 8; ++nt) {
    const float p00 = exp2f(s[nt][0] - mx0), p01 = exp2f(s[nt][1] - mx0);
    const float p10 = exp2f(s[nt][2] - mx1), p11 = exp2f(s[nt][3] - mx1);
    rs0 += p00 + p01;
    rs1 += p10 + p11;
    p[nt >> 1][(nt & 1) * 2] = pack2<T>(p00, p01);
    p[nt >> 1][(nt & 1) * 2 + 1] = pack2<T>(p10, p11);
  }
  st.l0 = st.l0 * alpha.x + rs0;
  st.l1 = st.l1 * alpha.y + rs1;
  return alpha;
}

template <int HD>
__device__ __forceinline__ void scale_rows(float (&o)[HD / 8][4], float2 f) {
#pragma unroll
  for (int dt = 0; dt < HD / 8; ++dt) {
    o[dt][0] *= f.x;
    o[dt][1] *= f.x;
    o[dt][2] *= f.y;
    o[dt][3] *= f.y;
  }
}

}  // namespace tinyllama::cuda::flash
