// v1 attention: see cuda_attention.h. Batched GEMMs run over the B*H (batch,
// head) pairs of the [B, H, S, hd] scratch buffers; the softmax, the mask and
// the layout changes are small kernels around them.
#include <cmath>

#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "ops/attention/cuda_attention.h"

namespace tinyllama::cuda {
namespace {

constexpr std::int64_t kAlign = 256;

std::int64_t aligned(std::int64_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

// dst[b, h, s, :] = src[b*S + s, (h / group)*hd : +hd]  (repeat_interleave over heads)
template <typename T>
__global__ void gather_heads_kernel(T* __restrict__ dst, const T* __restrict__ src, std::int64_t ld,
                                    int seq, int heads, int group, int hd, std::int64_t n) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(i % hd);
    std::int64_t rest = i / hd;
    const int s = static_cast<int>(rest % seq);
    rest /= seq;
    const int h = static_cast<int>(rest % heads);
    const std::int64_t b = rest / heads;
    dst[i] = src[(b * seq + s) * ld + static_cast<std::int64_t>(h / group) * hd + d];
  }
}

// dst[b*S + s, hh*hd + d] = sum over g < group of src[b, hh*group + g, s, d]:
// the inverse layout change, summing the repeated heads' gradients.
template <typename T>
__global__ void scatter_heads_kernel(T* __restrict__ dst, std::int64_t ld,
                                     const T* __restrict__ src, int seq, int dst_heads, int group,
                                     int hd, std::int64_t n) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const int heads = dst_heads * group;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(i % hd);
    std::int64_t rest = i / hd;
    const int hh = static_cast<int>(rest % dst_heads);
    rest /= dst_heads;
    const int s = static_cast<int>(rest % seq);
    const std::int64_t b = rest / seq;
    float acc = 0.f;
    for (int g = 0; g < group; ++g) {
      acc += to_f32(src[((b * heads + hh * group + g) * seq + s) * hd + d]);
    }
    dst[(b * seq + s) * ld + static_cast<std::int64_t>(hh) * hd + d] = from_f32<T>(acc);
  }
}

constexpr int kWarpsPerBlock = 8;

// One warp per score row (b, h, i): causal softmax over j <= i in place,
// zeros above the diagonal, and lse = max + log(sum) for the row.
template <typename T>
__global__ void softmax_causal_kernel(T* __restrict__ p, std::int64_t ld, float* __restrict__ lse,
                                      std::int64_t ld_lse, int seq, std::int64_t rows) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t r =
      blockIdx.x * static_cast<std::int64_t>(kWarpsPerBlock) + (threadIdx.x >> 5);
  if (r >= rows) return;  // whole warps leave together
  const int lane = threadIdx.x & 31;
  const int i = static_cast<int>(r % seq);
  T* row = p + r * ld;
  float m = -INFINITY;
  float s = 0.f;
  for (int j = lane; j <= i; j += 32) {  // online max and sum, per lane
    const float x = to_f32(row[j]);
    if (x > m) {
      s = s * expf(m - x) + 1.f;
      m = x;
    } else {
      s += expf(x - m);
    }
  }
  const float mx = warp_max(m);
  const float total = warp_sum(m == -INFINITY ? 0.f : s * expf(m - mx));
  const float inv = 1.f / total;
  for (int j = lane; j < seq; j += 32) {
    row[j] = from_f32<T>(j <= i ? expf(to_f32(row[j]) - mx) * inv : 0.f);
  }
  if (lane == 0) lse[(r / seq) * ld_lse + i] = mx + logf(total);
}

// dS = P * (dP - D) in place over dP, D = sum_j P_j dP_j over the row as
// stored; zero above the diagonal. D is taken from the same rounded P and dP
// the row is scaled by (the textbook softmax backward, as the CPU reference
// and autocast's fp32 softmax do), not from rowsum(dO * O): with O rounded to
// the compute dtype the two differ, and a D off by e shifts every dS of the
// row by -P e, an error that adds up coherently in dK.
template <typename T>
__global__ void softmax_backward_kernel(T* __restrict__ ds, std::int64_t ld_ds,
                                        const T* __restrict__ p, std::int64_t ld_p, int seq,
                                        std::int64_t rows) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t r =
      blockIdx.x * static_cast<std::int64_t>(kWarpsPerBlock) + (threadIdx.x >> 5);
  if (r >= rows) return;
  const int lane = threadIdx.x & 31;
  const int i = static_cast<int>(r % seq);
  T* drow = ds + r * ld_ds;
  const T* prow = p + r * ld_p;
  float dot = 0.f;
  for (int j = lane; j <= i; j += 32) dot += to_f32(prow[j]) * to_f32(drow[j]);
  const float dr = warp_sum(dot);
  for (int j = lane; j < seq; j += 32) {
    drow[j] = from_f32<T>(j <= i ? to_f32(prow[j]) * (to_f32(drow[j]) - dr) : 0.f);
  }
}

unsigned warp_grid(std::int64_t rows) {
  return static_cast<unsigned>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

// Shapes and scratch capacity, checked once per call.
struct Dims {
  int batch, seq, heads, kv_heads, hd, group;
  std::int64_t tokens, head_elems, score_rows;
};

Dims check(const char* name, const AttentionScratch& scratch, const AttentionShape& s, Mat q, Mat k,
           Mat v, Mat out, Mat lse, Mat probs) {
  require(s.batch > 0 && s.seq > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0, name,
          "attention shape must be positive");
  require(s.heads % s.kv_heads == 0, name, "heads must be a multiple of kv_heads");
  Dims d{s.batch, s.seq, s.heads, s.kv_heads, s.head_dim, s.heads / s.kv_heads, 0, 0, 0};
  d.tokens = static_cast<std::int64_t>(s.batch) * s.seq;
  d.head_elems = d.tokens * s.heads * s.head_dim;
  d.score_rows = d.tokens * s.heads;
  const std::int64_t qw = static_cast<std::int64_t>(s.heads) * s.head_dim;
  const std::int64_t kw = static_cast<std::int64_t>(s.kv_heads) * s.head_dim;
  require(q.rows == d.tokens && q.cols == qw, name, "q " + shape_str(q) + " does not match shape");
  require(out.rows == d.tokens && out.cols == qw, name,
          "out " + shape_str(out) + " does not match");
  require(k.rows == d.tokens && k.cols == kw, name, "k " + shape_str(k) + " does not match shape");
  require(v.rows == d.tokens && v.cols == kw, name, "v " + shape_str(v) + " does not match shape");
  require(lse.rows == static_cast<std::int64_t>(s.batch) * s.heads && lse.cols == s.seq, name,
          "lse must be [B*H, S], got " + shape_str(lse));
  require(probs.rows == d.score_rows && probs.cols == s.seq, name,
          "probs must be [B*H*S, S], got " + shape_str(probs));
  require_dtype(name, lse, DType::F32);
  for (const Mat* m : {&k, &v, &out, &probs}) {
    require(m->dtype == q.dtype, name, "q, k, v, out and probs must share one dtype");
  }
  require(scratch.q != nullptr && scratch.dtype == q.dtype && scratch.head_elems >= d.head_elems &&
              scratch.score_elems >= d.score_rows * s.seq,
          name, "attention scratch was not prepared for this shape and dtype (call prepare())");
  return d;
}

template <typename T>
void gather(void* dst, Mat src, const Dims& d, int group, cudaStream_t stream) {
  launch_kernel(gather_heads_kernel<T>, grid_for(d.head_elems), kThreads, 0, stream,
                static_cast<T*>(dst), src.ptr<const T>(), src.ld, d.seq, d.heads, group, d.hd,
                d.head_elems);
  CUDA_CHECK_LAUNCH();
}

template <typename T>
void scatter(Mat dst, const void* src, const Dims& d, int group, cudaStream_t stream) {
  const std::int64_t n = d.tokens * (d.heads / group) * d.hd;
  launch_kernel(scatter_heads_kernel<T>, grid_for(n), kThreads, 0, stream, dst.ptr<T>(), dst.ld,
                static_cast<const T*>(src), d.seq, d.heads / group, group, d.hd, n);
  CUDA_CHECK_LAUNCH();
}

// One (S x hd) head matrix of a [B, H, S, hd] buffer, batched over B*H.
Mat heads(void* p, DType t, const Dims& d) {
  return Mat(p, t, d.seq, d.hd);
}

}  // namespace

std::int64_t AttentionScratch::bytes_for(const AttentionShape& s, DType dtype) {
  const auto es = static_cast<std::int64_t>(dtype_size(dtype));
  const std::int64_t rows = static_cast<std::int64_t>(s.batch) * s.heads * s.seq;
  return 7 * aligned(rows * s.head_dim * es) + aligned(rows * s.seq * es);
}

AttentionScratch AttentionScratch::assigned(void* base, const AttentionShape& s, DType t) {
  const auto es = static_cast<std::int64_t>(dtype_size(t));
  const std::int64_t rows = static_cast<std::int64_t>(s.batch) * s.heads * s.seq;
  AttentionScratch sc;
  sc.dtype = t;
  sc.head_elems = rows * s.head_dim;
  sc.score_elems = rows * s.seq;
  char* p = static_cast<char*>(base);
  auto take = [&p](std::int64_t bytes) {
    void* r = p;
    p += aligned(bytes);
    return r;
  };
  for (void** buf : {&sc.q, &sc.k, &sc.v, &sc.o, &sc.dq, &sc.dk, &sc.dv}) {
    *buf = take(sc.head_elems * es);
  }
  sc.dscores = take(sc.score_elems * es);
  return sc;
}

void materialized_attention_forward(GemmRunner& gemm, const AttentionScratch& sc, Mat out, Mat lse,
                                    Mat probs, Mat q, Mat k, Mat v, const AttentionShape& shape,
                                    cudaStream_t stream) {
  const char* name = "attention_forward";
  const Dims d = check(name, sc, shape, q, k, v, out, lse, probs);
  const DType t = q.dtype;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.hd)));
  const int bh = d.batch * d.heads;
  const std::int64_t hs = static_cast<std::int64_t>(d.seq) * d.hd;  // head matrix stride
  const std::int64_t ps = static_cast<std::int64_t>(d.seq) * probs.ld;
  const Mat p(probs.data, t, d.seq, d.seq, probs.ld);
  dispatch_float(t, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    gather<T>(sc.q, q, d, 1, stream);
    gather<T>(sc.k, k, d, d.group, stream);
    gather<T>(sc.v, v, d, d.group, stream);
    // scores = scale * Q K^T, straight into probs; the softmax then rewrites it.
    gemm.run(p, heads(sc.q, t, d), false, heads(sc.k, t, d), true, scale, 0.f, {bh, ps, hs, hs});
    launch_kernel(softmax_causal_kernel<T>, warp_grid(d.score_rows), kWarpsPerBlock * 32, 0, stream,
                  probs.ptr<T>(), probs.ld, lse.ptr<float>(), lse.ld, d.seq, d.score_rows);
    CUDA_CHECK_LAUNCH();
    gemm.run(heads(sc.o, t, d), p, false, heads(sc.v, t, d), false, 1.f, 0.f, {bh, hs, ps, hs});
    scatter<T>(out, sc.o, d, 1, stream);
  });
}

void materialized_attention_backward(GemmRunner& gemm, const AttentionScratch& sc, Mat dq, Mat dk,
                                     Mat dv, Mat dout, Mat q, Mat k, Mat v, Mat out, Mat lse,
                                     Mat probs, const AttentionShape& shape, cudaStream_t stream) {
  const char* name = "attention_backward";
  const Dims d = check(name, sc, shape, q, k, v, out, lse, probs);
  require(dq.rows == q.rows && dq.cols == q.cols && dout.rows == q.rows && dout.cols == q.cols,
          name, "dq and dout must match q");
  require(dk.rows == k.rows && dk.cols == k.cols && dv.rows == v.rows && dv.cols == v.cols, name,
          "dk and dv must match k and v");
  for (const Mat* m : {&dq, &dk, &dv, &dout}) {
    require(m->dtype == q.dtype, name, "gradients must share q's dtype");
  }
  const DType t = q.dtype;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.hd)));
  const int bh = d.batch * d.heads;
  const std::int64_t hs = static_cast<std::int64_t>(d.seq) * d.hd;
  const std::int64_t ps = static_cast<std::int64_t>(d.seq) * probs.ld;
  const std::int64_t ds_stride = static_cast<std::int64_t>(d.seq) * d.seq;
  const Mat p(probs.data, t, d.seq, d.seq, probs.ld);
  const Mat ds(sc.dscores, t, d.seq, d.seq);
  dispatch_float(t, name, [&](auto tag) {
    using T = typename decltype(tag)::type;
    // The forward's scratch was overwritten by later layers: gather again.
    gather<T>(sc.q, q, d, 1, stream);
    gather<T>(sc.k, k, d, d.group, stream);
    gather<T>(sc.v, v, d, d.group, stream);
    gather<T>(sc.o, dout, d, 1, stream);
    const Mat dO = heads(sc.o, t, d);
    // dV = P^T dO;  dP = dO V^T
    gemm.run(heads(sc.dv, t, d), p, true, dO, false, 1.f, 0.f, {bh, hs, ps, hs});
    gemm.run(ds, dO, false, heads(sc.v, t, d), true, 1.f, 0.f, {bh, ds_stride, hs, hs});
    launch_kernel(softmax_backward_kernel<T>, warp_grid(d.score_rows), kWarpsPerBlock * 32, 0,
                  stream, static_cast<T*>(sc.dscores), d.seq, probs.ptr<const T>(), probs.ld, d.seq,
                  d.score_rows);
    CUDA_CHECK_LAUNCH();
    // dQ = dS K * scale;  dK = dS^T Q * scale
    gemm.run(heads(sc.dq, t, d), ds, false, heads(sc.k, t, d), false, scale, 0.f,
             {bh, hs, ds_stride, hs});
    gemm.run(heads(sc.dk, t, d), ds, true, heads(sc.q, t, d), false, scale, 0.f,
             {bh, hs, ds_stride, hs});
    scatter<T>(dq, sc.dq, d, 1, stream);
    scatter<T>(dk, sc.dk, d, d.group, stream);
    scatter<T>(dv, sc.dv, d, d.group, stream);
  });
  // lse and out go unused here: materialised attention reads the saved probs.
}

}  // namespace tinyllama::cuda
