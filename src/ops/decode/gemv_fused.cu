// The batch-1 step's weight products with their neighbours folded in, so a
// layer is four of these kernels and two of attention instead of ten: the
// RMSNorm before the QKV and gate/up products (their prologue), RoPE and the
// cache append after QKV, SwiGLU after gate/up, the residual add after Wo
// and Wdown (their epilogues). Each block stages the (normalised) input in
// shared memory once; each warp streams two weight rows with 16-byte
// cache-streaming loads, the first batch issued before the staging so that
// the prologue hides under the weights' latency. Launched programmatically
// (PDL), a kernel's blocks may start while the kernel before it finishes:
// they read only weights until griddepcontrol.wait, which returns once that
// kernel has completed and its writes are visible, so the weights stream
// through the previous kernel's tail and launch.
//
// The kernels round where the unfused step stores (the normalised input,
// q/k/v before and after RoPE, gate and up, the SwiGLU product), so every
// path of the decoder has the same rounding points and one reference
// (tests/infer/rounded_reference.h). The residual stream and the norm
// weights are fp32 whatever the dtype, as under torch.autocast: the norm
// prologue reads an fp32 input, the residual epilogue writes one.
#include <string>

#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "device/cuda_launch.h"
#include "device/cuda_vec.cuh"
#include "ops/decode/cuda_decode.h"

namespace tinyllama::cuda {
namespace {

constexpr int kWarps = 8;  // warps per block, one output unit each per pass
constexpr int kMaxSharedBytes = 48 * 1024;

enum class Epilogue {
  Store,    // y[r] = p_r (+ y[r]): rows 2u, 2u + 1
  Swiglu,   // act[u] = silu(p_u) * p_{F + u}
  QkvRope,  // rows 2u, 2u + 1 rotated (q, k) or not (v), into q or the caches
};

template <typename T, typename O>
struct FusedArgs {
  const T* x = nullptr;                // the input without a norm prologue
  const float* residual = nullptr;     // the input with one: the fp32 residual stream
  const float* norm_weight = nullptr;  // null: no RMSNorm prologue
  float eps = 0.f;
  const T* w = nullptr;
  std::int64_t ld_w = 0;
  int k = 0;      // the input's width
  int units = 0;  // outputs per the epilogue's unit
  // Store
  O* y = nullptr;
  int rows = 0;
  bool accumulate = false;
  // Swiglu: act[u] from rows u and ffn + u
  T* act = nullptr;
  int ffn = 0;
  // QkvRope: q row (ld_w unrelated), caches at row *position
  T* q = nullptr;
  T* k_cache = nullptr;
  T* v_cache = nullptr;
  std::int64_t ld_cache = 0;
  const std::int32_t* position = nullptr;
  const double* inv_freq = nullptr;
  int q_dim = 0, kv_dim = 0, half_hd = 0;
};

template <typename T, int Vec>
using Raw = typename RawWord<static_cast<int>(sizeof(T)) * Vec>::type;

// Weights are read once per token: a streaming load keeps them from
// evicting the input, the cache and the next kernel's data from L2.
template <typename T, int Vec>
__device__ __forceinline__ Raw<T, Vec> load_streaming(const T* p) {
  return __ldcs(reinterpret_cast<const Raw<T, Vec>*>(p));
}

template <typename T, int Vec>
__device__ __forceinline__ float dot_raw(Raw<T, Vec> raw, const float (&x)[Vec]) {
  Pack<T, Vec> pk;
  pk.raw = raw;
  float s = 0.f;
#pragma unroll
  for (int e = 0; e < Vec; ++e) s += to_f32(pk.v[e]) * x[e];
  return s;
}

template <typename T>
__device__ __forceinline__ float rounded(float v) {
  return to_f32(from_f32<T>(v));
}

// The input into shared memory: x as it is, or with a norm weight the fp32
// residual stream normalised and rounded to T, as rmsnorm_forward's fp32
// output converted to T.
template <typename T, typename O, int Vec>
__device__ void stage_input(const FusedArgs<T, O>& a, T* xs) {
  if (a.norm_weight == nullptr) {
    for (int c = threadIdx.x * Vec; c < a.k; c += blockDim.x * Vec) {
      float v[Vec];
      load_f32<Vec>(a.x + c, v);
      store_f32<Vec>(xs + c, v);
    }
    __syncthreads();
    return;
  }
  float ss = 0.f;
  for (int c = threadIdx.x * Vec; c < a.k; c += blockDim.x * Vec) {
    float v[Vec];
    load_f32<Vec>(a.residual + c, v);
#pragma unroll
    for (int e = 0; e < Vec; ++e) ss += v[e] * v[e];
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(a.k) + a.eps);
  for (int c = threadIdx.x * Vec; c < a.k; c += blockDim.x * Vec) {
    float v[Vec], wv[Vec];
    load_f32<Vec>(a.residual + c, v);
    load_f32<Vec>(a.norm_weight + c, wv);
#pragma unroll
    for (int e = 0; e < Vec; ++e) v[e] = v[e] * inv * wv[e];
    store_f32<Vec>(xs + c, v);
  }
  __syncthreads();
}

template <Epilogue E>
__device__ __forceinline__ void unit_rows(int unit, int ffn, int& r0, int& r1) {
  if constexpr (E == Epilogue::Swiglu) {
    r0 = unit;
    r1 = ffn + unit;
  } else {
    r0 = 2 * unit;
    r1 = 2 * unit + 1;
  }
}

template <typename T, typename O, Epilogue E>
__device__ __forceinline__ void finish_unit(const FusedArgs<T, O>& a, int unit, float p0,
                                            float p1) {
  if constexpr (E == Epilogue::Store) {
    const int r0 = 2 * unit, r1 = r0 + 1;
    const float y0 = a.accumulate ? to_f32(a.y[r0]) : 0.f;
    a.y[r0] = from_f32<O>(p0 + y0);
    if (r1 < a.rows) {
      const float y1 = a.accumulate ? to_f32(a.y[r1]) : 0.f;
      a.y[r1] = from_f32<O>(p1 + y1);
    }
  } else if constexpr (E == Epilogue::Swiglu) {
    const float g = rounded<T>(p0), u = rounded<T>(p1);
    a.act[unit] = from_f32<T>(g * (1.f / (1.f + expf(-g))) * u);
  } else {
    // decode_rope.cu's arithmetic: the angle in double, reduced mod 2 pi.
    constexpr double kTwoPi = 6.283185307179586476925286766559;
    const std::int64_t pos = *a.position;
    const int c = 2 * unit;
    const float x0 = rounded<T>(p0), x1 = rounded<T>(p1);
    if (c >= a.q_dim + a.kv_dim) {  // v
      T* dst = a.v_cache + pos * a.ld_cache + (c - a.q_dim - a.kv_dim);
      dst[0] = from_f32<T>(x0);
      dst[1] = from_f32<T>(x1);
      return;
    }
    const double angle = static_cast<double>(pos) * a.inv_freq[unit % a.half_hd];
    const float reduced = static_cast<float>(angle - kTwoPi * rint(angle / kTwoPi));
    float s, co;
    sincosf(reduced, &s, &co);
    T* dst = c < a.q_dim ? a.q + c : a.k_cache + pos * a.ld_cache + (c - a.q_dim);
    dst[0] = from_f32<T>(x0 * co - x1 * s);
    dst[1] = from_f32<T>(x0 * s + x1 * co);
  }
}

// kUnroll: 16-byte loads in flight per lane and row. 8 where rows are long
// enough (a 2048-wide bf16 row is one batch of them): at the 1 B config the
// Wo and Wdown products have one unit per warp and one block per SM, so the
// bytes in flight per warp are what keeps HBM busy.
template <typename T, typename O, int Vec, Epilogue E, int kUnroll>
__global__ void __launch_bounds__(kWarps * 32) fused_gemv_kernel(FusedArgs<T, O> a) {
  extern __shared__ __align__(16) unsigned char shared_raw[];
  T* xs = reinterpret_cast<T*>(shared_raw);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kStep = 32 * Vec;
  const int stride = gridDim.x * kWarps;
  int unit = blockIdx.x * kWarps + warp;

  // The first batch of this warp's first unit, loaded before the staging.
  Raw<T, Vec> w0[kUnroll], w1[kUnroll];
  const T *row0 = a.w, *row1 = a.w;
  auto rows_of = [&](int u) {
    int r0 = 0, r1 = 0;
    unit_rows<E>(u, a.ffn, r0, r1);
    if (E == Epilogue::Store && r1 >= a.rows) r1 = r0;  // the odd last row: read twice
    row0 = a.w + r0 * a.ld_w;
    row1 = a.w + r1 * a.ld_w;
  };
  auto load_batch = [&](int c) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int cu = c + u * kStep;
      if (cu < a.k) {
        w0[u] = load_streaming<T, Vec>(row0 + cu);
        w1[u] = load_streaming<T, Vec>(row1 + cu);
      }
    }
  };
  // The next kernel may be scheduled now (it waits for this one to complete
  // before it reads anything this one writes).
  pdl_allow_next();
  if (unit < a.units) {
    rows_of(unit);
    load_batch(lane * Vec);
  }
  pdl_wait_previous();
  stage_input<T, O, Vec>(a, xs);

  for (; unit < a.units; unit += stride) {
    float p0 = 0.f, p1 = 0.f;
    for (int c = lane * Vec; c < a.k; c += kUnroll * kStep) {
      if (c != lane * Vec) load_batch(c);  // the first batch is in flight already
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int cu = c + u * kStep;
        if (cu < a.k) {
          float xv[Vec];
          load_f32<Vec>(xs + cu, xv);
          p0 += dot_raw<T, Vec>(w0[u], xv);
          p1 += dot_raw<T, Vec>(w1[u], xv);
        }
      }
    }
    p0 = warp_sum(p0);
    p1 = warp_sum(p1);
    if (lane == 0) finish_unit<T, O, E>(a, unit, p0, p1);
    if (unit + stride < a.units) {
      rows_of(unit + stride);
      load_batch(lane * Vec);
    }
  }
}

// One wave of the blocks that fit on the GPU at once (a warp takes further
// units in turn, its block's staged input reused), or fewer when there are
// fewer units.
// The occupancy is asked once per kernel and input width: an eager step
// (--no-graph) launches these kernels dozens of times per token.
template <typename Kernel>
int wave_blocks(Kernel kernel, std::size_t shared, int units) {
  const int per_sm =
      resident_blocks_per_sm(reinterpret_cast<const void*>(kernel), kWarps * 32, shared);
  return std::min((units + kWarps - 1) / kWarps, per_sm * current_device_sm_count());
}

// Launches the kernel for T's 16-byte width when x, w (and the norm weight)
// allow it, else one element at a time.
template <Epilogue E, typename T, typename O>
void launch(FusedArgs<T, O> a, std::initializer_list<const Mat*> inputs, const char* op,
            cudaStream_t stream, bool programmatic) {
  if (a.units == 0) return;
  const std::size_t shared = static_cast<std::size_t>(a.k) * sizeof(T);
  require(shared <= kMaxSharedBytes, op,
          "an input of " + std::to_string(a.k) + " elements does not fit in shared memory");
  auto run = [&](auto kernel) {
    launch_with_pdl(kernel, dim3(static_cast<unsigned>(wave_blocks(kernel, shared, a.units))),
                    dim3(kWarps * 32), shared, stream, programmatic, a);
  };
  if (vec_width<T>(inputs) == kMaxVec<T>) {
    constexpr int kVec = kMaxVec<T>;
    if (a.k >= 8 * 32 * kVec) {
      run(fused_gemv_kernel<T, O, kVec, E, 8>);
    } else {
      run(fused_gemv_kernel<T, O, kVec, E, 4>);
    }
  } else {
    run(fused_gemv_kernel<T, O, 1, E, 4>);
  }
}

template <typename T, typename O>
FusedArgs<T, O> common_args(Mat x, Mat w, const Mat* norm_weight, double eps) {
  FusedArgs<T, O> a;
  if (norm_weight != nullptr) {
    a.residual = x.ptr<float>();
    a.norm_weight = norm_weight->ptr<float>();
  } else {
    a.x = x.ptr<T>();
  }
  a.eps = static_cast<float>(eps);
  a.w = w.ptr<T>();
  a.ld_w = w.ld;
  a.k = static_cast<int>(w.cols);
  return a;
}

// With a norm weight, x is the fp32 residual stream and the weight fp32;
// without, x has w's dtype.
void check_common(const char* op, Mat x, Mat w, const Mat* norm_weight) {
  require(x.rows == 1 && x.cols == w.cols, op,
          "x " + shape_str(x) + " is not one row of w's width " + shape_str(w));
  require(w.rows <= (std::int64_t{1} << 30) && w.cols <= (std::int64_t{1} << 30), op, "too large");
  if (norm_weight != nullptr) {
    require(norm_weight->rows == 1 && norm_weight->cols == x.cols, op,
            "the norm weight " + shape_str(*norm_weight) + " is not one row of x's width");
    require(x.dtype == DType::F32 && norm_weight->dtype == DType::F32, op,
            "a normalised input and its norm weight must be float32 (the residual stream)");
  } else {
    require(w.dtype == x.dtype, op, "x and w must share a dtype");
  }
}

}  // namespace

bool gemv_fused_fits(std::int64_t k, DType t) {
  return k * static_cast<std::int64_t>(dtype_size(t)) <= kMaxSharedBytes;
}

void gemv_fused(Mat y, Mat x, Mat w, const Mat* norm_weight, double eps, bool accumulate,
                cudaStream_t stream, bool programmatic) {
  const char* op = "gemv_fused";
  check_common(op, x, w, norm_weight);
  require(y.rows == 1 && y.cols == w.rows, op,
          "y " + shape_str(y) + " is not one row of w's height " + shape_str(w));
  require(y.dtype == w.dtype || y.dtype == DType::F32, op,
          "y must be w's dtype or float32, not " + std::string(dtype_name(y.dtype)));
  dispatch_float(w.dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    auto go = [&](auto out_tag) {
      using O = typename decltype(out_tag)::type;
      FusedArgs<T, O> a = common_args<T, O>(x, w, norm_weight, eps);
      a.y = y.ptr<O>();
      a.rows = static_cast<int>(w.rows);
      a.units = static_cast<int>((w.rows + 1) / 2);
      a.accumulate = accumulate;
      if (norm_weight != nullptr) {
        launch<Epilogue::Store>(a, {&x, &w, norm_weight}, op, stream, programmatic);
      } else {
        launch<Epilogue::Store>(a, {&x, &w}, op, stream, programmatic);
      }
    };
    if (y.dtype == DType::F32) {
      go(TypeTag<float>{});
    } else {
      go(TypeTag<T>{});
    }
  });
}

void gemv_norm_swiglu(Mat act, Mat x, Mat w_gate_up, Mat norm_weight, double eps,
                      cudaStream_t stream, bool programmatic) {
  const char* op = "gemv_norm_swiglu";
  check_common(op, x, w_gate_up, &norm_weight);
  require(w_gate_up.rows % 2 == 0 && act.rows == 1 && act.cols == w_gate_up.rows / 2, op,
          "act " + shape_str(act) + " is not one row of half w's height " + shape_str(w_gate_up));
  require_dtype(op, act, w_gate_up.dtype);
  dispatch_float(w_gate_up.dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    FusedArgs<T, T> a = common_args<T, T>(x, w_gate_up, &norm_weight, eps);
    a.act = act.ptr<T>();
    a.ffn = static_cast<int>(act.cols);
    a.units = a.ffn;
    launch<Epilogue::Swiglu>(a, {&x, &w_gate_up, &norm_weight}, op, stream, programmatic);
  });
}

void gemv_norm_qkv_rope(Mat q, Mat k_cache, Mat v_cache, Mat x, Mat w_qkv, Mat norm_weight,
                        double eps, const std::int32_t* position, const double* inv_freq, int heads,
                        int kv_heads, int head_dim, cudaStream_t stream, bool programmatic) {
  const char* op = "gemv_norm_qkv_rope";
  check_common(op, x, w_qkv, &norm_weight);
  require(head_dim > 0 && head_dim % 2 == 0, op, "head_dim must be positive and even");
  const int q_dim = heads * head_dim, kv_dim = kv_heads * head_dim;
  require(w_qkv.rows == q_dim + 2 * kv_dim, op,
          "w_qkv " + shape_str(w_qkv) + " is not [(H + 2K) * hd, D]");
  require(q.rows == 1 && q.cols == q_dim, op, "q " + shape_str(q) + " is not [1, H * hd]");
  require(k_cache.cols == kv_dim && v_cache.cols == kv_dim && k_cache.ld == v_cache.ld &&
              k_cache.rows == v_cache.rows,
          op, "the caches " + shape_str(k_cache) + ", " + shape_str(v_cache) + " differ");
  require(q.dtype == w_qkv.dtype && k_cache.dtype == w_qkv.dtype && v_cache.dtype == w_qkv.dtype,
          op, "dtypes differ");
  dispatch_float(w_qkv.dtype, op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    FusedArgs<T, T> a = common_args<T, T>(x, w_qkv, &norm_weight, eps);
    a.q = q.ptr<T>();
    a.k_cache = k_cache.ptr<T>();
    a.v_cache = v_cache.ptr<T>();
    a.ld_cache = k_cache.ld;
    a.position = position;
    a.inv_freq = inv_freq;
    a.q_dim = q_dim;
    a.kv_dim = kv_dim;
    a.half_hd = head_dim / 2;
    a.units = (q_dim + 2 * kv_dim) / 2;
    launch<Epilogue::QkvRope>(a, {&x, &w_qkv, &norm_weight}, op, stream, programmatic);
  });
}

}  // namespace tinyllama::cuda
