// The fused batch-1 GEMVs of the CUDA decoder (src/ops/decode/gemv_fused.cu)
// against float64 references written out here, in float32 and bfloat16, at
// awkward shapes: one output row and odd counts of them, odd widths and
// others that are not multiples of 8 (the one-element path) and long ones (2048 and more:
// the kernels unrolled 8 deep; 8192: several batches per lane), head_dim 8 to 128 and 34, GQA
// groups 1 to 4, RoPE at positions 1, 37 and 1000 (angles of many turns: their reduction). The
// references round where the kernels do (the normalised input, q/k/v before RoPE, gate and up,
// every output) through the host's exact rounding, so a kernel can differ only by its fp32 sums
// moving a value to the neighbouring bf16 number: one ulp of the output's largest element at most,
// tests/python/test_parity.py's floor (float32: the op tolerance).
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/gpu_test_util.h"
#include "infer/rounded_reference.h"
#include "ops/decode/cuda_decode.h"

namespace tinyllama::gpu_test {
namespace {

constexpr double kEps = 1e-6;

double limit(DType t) {
  return t == DType::BF16 ? reference::kBf16Ulp : tolerance(DType::F32);
}

// The staged input: x, or RMSNorm(x) * weight rounded to t as the kernel
// stores it in shared memory (x and the weight then fp32: the residual
// stream and a norm weight as the decoder keeps them).
std::vector<double> staged_input(const Twin& x, const Twin* norm_weight, DType t) {
  std::vector<double> v = Harness::host_values(x.cpu);
  if (norm_weight == nullptr) return v;
  const std::vector<double> w = Harness::host_values(norm_weight->cpu);
  double ss = 0;
  for (double e : v) ss += e * e;
  const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(v.size()) + kEps);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = round_to(v[i] * rstd * w[i], t);
  return v;
}

// Row r of w times the staged input, in float64.
double product(const Twin& w, const std::vector<double>& in, std::int64_t r) {
  double s = 0;
  for (std::int64_t c = 0; c < w.cpu.cols; ++c) s += w.cpu.ptr<double>()[r * w.cpu.ld + c] * in[c];
  return s;
}

void sync() {
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// (dtype, N, K, with the RMSNorm prologue, accumulate into y, y in float32)
using GemvParam = std::tuple<DType, int, int, bool, bool, bool>;

class GpuGemvFused : public GpuParamTest<GemvParam> {};

TEST_P(GpuGemvFused, MatchesTheReference) {
  const auto [t, n, k, norm, accumulate, f32_out] = GetParam();
  Harness h(t);
  const DType out_t = f32_out ? DType::F32 : t;
  const Twin x = h.input(1, k, norm ? DType::F32 : t, 1.0, 0, 0.3);
  const Twin nw = h.input(1, k, DType::F32, 0.3, 0, 1.0);
  const Twin w = h.input(n, k, t, 0.1);
  // y starts as the residual when accumulating, else as NaN (it must be
  // overwritten, never read).
  const Twin y = accumulate ? h.input(1, n, out_t, 2.0) : h.output(1, n, out_t);
  const std::vector<double> in = staged_input(x, norm ? &nw : nullptr, t);
  for (int r = 0; r < n; ++r) {
    double& want = y.cpu.ptr<double>()[r];
    want = round_to(product(w, in, r) + (accumulate ? want : 0.0), out_t);
  }
  cuda::gemv_fused(y.gpu, x.gpu, w.gpu, norm ? &nw.gpu : nullptr, kEps, accumulate, nullptr);
  sync();
  h.expect_close(y, limit(t), "gemv_fused");
}

std::string gemv_name(const ::testing::TestParamInfo<GemvParam>& info) {
  const auto [t, n, k, norm, accumulate, f32_out] = info.param;
  return dtype_label(t) + "_N" + std::to_string(n) + "_K" + std::to_string(k) +
         (norm ? "_norm" : "") + (accumulate ? "_acc" : "") + (f32_out ? "_outF32" : "");
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGemvFused,
                         ::testing::Values(GemvParam{DType::F32, 1, 128, false, false, false},
                                           GemvParam{DType::BF16, 1, 128, true, false, false},
                                           GemvParam{DType::F32, 7, 102, true, true, false},
                                           GemvParam{DType::BF16, 7, 102, true, true, false},
                                           GemvParam{DType::F32, 33, 101, true, true, false},
                                           GemvParam{DType::BF16, 33, 101, true, false, true},
                                           GemvParam{DType::F32, 97, 264, false, true, false},
                                           GemvParam{DType::BF16, 97, 264, false, true, false},
                                           GemvParam{DType::BF16, 301, 256, true, false, true},
                                           GemvParam{DType::F32, 301, 256, true, false, true},
                                           GemvParam{DType::BF16, 2049, 128, false, false, false},
                                           GemvParam{DType::BF16, 64, 8192, false, true, false},
                                           GemvParam{DType::F32, 64, 8192, false, true, false},
                                           GemvParam{DType::BF16, 5000, 512, true, false, true}),
                         gemv_name);

// (dtype, F, D)
using SwigluParam = std::tuple<DType, int, int>;

class GpuGemvNormSwiglu : public GpuParamTest<SwigluParam> {};

TEST_P(GpuGemvNormSwiglu, MatchesTheReference) {
  const auto [t, f, d] = GetParam();
  Harness h(t);
  const Twin x = h.input(1, d, DType::F32, 1.0, 0, -0.2);
  const Twin nw = h.input(1, d, DType::F32, 0.3, 0, 1.0);
  const Twin w = h.input(2 * f, d, t, 0.2);
  const Twin act = h.output(1, f, t);
  const std::vector<double> in = staged_input(x, &nw, t);
  for (int j = 0; j < f; ++j) {
    const double g = round_to(product(w, in, j), t), u = round_to(product(w, in, f + j), t);
    act.cpu.ptr<double>()[j] = round_to(g / (1.0 + std::exp(-g)) * u, t);
  }
  cuda::gemv_norm_swiglu(act.gpu, x.gpu, w.gpu, nw.gpu, kEps, nullptr);
  sync();
  h.expect_close(act, limit(t), "gemv_norm_swiglu");
}

std::string swiglu_name(const ::testing::TestParamInfo<SwigluParam>& info) {
  const auto [t, f, d] = info.param;
  return dtype_label(t) + "_F" + std::to_string(f) + "_D" + std::to_string(d);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuGemvNormSwiglu,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16),
                                            ::testing::Values(1, 70, 264, 1000),
                                            ::testing::Values(101, 102, 128, 512, 2048)),
                         swiglu_name);

// (dtype, (heads, kv heads, head_dim), position)
using QkvParam = std::tuple<DType, std::tuple<int, int, int>, int>;

class GpuGemvNormQkvRope : public GpuParamTest<QkvParam> {};

TEST_P(GpuGemvNormQkvRope, MatchesTheReference) {
  const auto [t, shape, pos] = GetParam();
  const auto [heads, kv_heads, hd] = shape;
  Harness h(t);
  // Any width: the input need not be H * hd; an odd one beside head_dim 34.
  const int d = heads * hd + (hd == 34 ? 7 : 8);
  const int qd = heads * hd, kvd = kv_heads * hd, rows = pos + 2;
  const double theta = 10000.0;
  const Twin x = h.input(1, d, DType::F32, 1.0, 0, 0.1);
  const Twin nw = h.input(1, d, DType::F32, 0.3, 0, 1.0);
  const Twin w = h.input(qd + 2 * kvd, d, t, 0.2);
  const Twin q = h.output(1, qd, t);
  const Twin k_cache = h.output(rows, kvd, t), v_cache = h.output(rows, kvd, t);
  std::vector<double> inv(static_cast<std::size_t>(hd / 2));
  for (int i = 0; i < hd / 2; ++i) inv[i] = std::pow(theta, -2.0 * i / hd);
  void* inv_gpu = h.gpu().allocate(inv.size() * sizeof(double));
  h.gpu().upload(inv_gpu, inv.data(), inv.size() * sizeof(double));
  const Tokens position = h.tokens({pos});

  const std::vector<double> in = staged_input(x, &nw, t);
  for (int c = 0; c < qd + 2 * kvd; c += 2) {
    const double a = round_to(product(w, in, c), t), b = round_to(product(w, in, c + 1), t);
    double ra = a, rb = b;
    if (c < qd + kvd) {
      const double angle = pos * inv[(c % hd) / 2];
      ra = round_to(a * std::cos(angle) - b * std::sin(angle), t);
      rb = round_to(a * std::sin(angle) + b * std::cos(angle), t);
    }
    double* dst = c < qd ? q.cpu.ptr<double>() + c
                  : c < qd + kvd
                      ? k_cache.cpu.ptr<double>() + pos * k_cache.cpu.ld + (c - qd)
                      : v_cache.cpu.ptr<double>() + pos * v_cache.cpu.ld + (c - qd - kvd);
    dst[0] = ra;
    dst[1] = rb;
  }
  cuda::gemv_norm_qkv_rope(q.gpu, k_cache.gpu, v_cache.gpu, x.gpu, w.gpu, nw.gpu, kEps,
                           position.gpu, static_cast<const double*>(inv_gpu), heads, kv_heads, hd,
                           nullptr);
  sync();
  h.expect_close(q, limit(t), "q");
  for (const Twin* cache : {&k_cache, &v_cache}) {
    const Twin row{cache->cpu.row_block(pos, 1), cache->gpu.row_block(pos, 1), false};
    h.expect_close(row, limit(t), cache == &k_cache ? "k_cache row" : "v_cache row");
    // The other rows are untouched: still the poison (NaN) of h.output.
    for (int r : {pos - 1, pos + 1}) {
      for (double v : h.device_values(cache->gpu.row_block(r, 1))) {
        ASSERT_TRUE(std::isnan(v)) << "row " << r << " of a cache was written";
      }
    }
  }
  h.gpu().release(inv_gpu);
}

std::string qkv_name(const ::testing::TestParamInfo<QkvParam>& info) {
  const auto [t, shape, pos] = info.param;
  const auto [heads, kv_heads, hd] = shape;
  return dtype_label(t) + "_H" + std::to_string(heads) + "K" + std::to_string(kv_heads) + "_hd" +
         std::to_string(hd) + "_pos" + std::to_string(pos);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, GpuGemvNormQkvRope,
    ::testing::Combine(::testing::Values(DType::F32, DType::BF16),
                       ::testing::Values(std::make_tuple(4, 4, 32), std::make_tuple(4, 2, 64),
                                         std::make_tuple(4, 1, 128), std::make_tuple(3, 1, 34),
                                         std::make_tuple(6, 3, 8), std::make_tuple(16, 4, 128)),
                       ::testing::Values(1, 37, 1000)),
    qkv_name);

// Launched programmatically, a kernel's blocks may start before the kernel
// before it has finished (that one lets them be scheduled as soon as it
// runs): the second product reads the first's output, which is NaN until
// written, so a kernel that read its input before the wait would show.
TEST_F(GpuTest, ProgrammaticLaunchesWaitForTheKernelBefore) {
  Harness h(DType::BF16);
  const DType t = DType::BF16;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const int n = 4096, k = 4096, m = 96;
  const Twin x = h.input(1, k, t);
  const Twin w1 = h.input(n, k, t, 0.05);
  const Twin w2 = h.input(m, n, t, 0.1);
  const Twin nw = h.input(1, n, DType::F32, 0.3, 0, 1.0);
  for (int round = 0; round < 3; ++round) {
    // y1 as the residual stream, fp32, read by the second product's norm.
    const Twin y1 = h.output(1, n, DType::F32), y2 = h.output(1, m, DType::F32);
    cuda::gemv_fused(y1.gpu, x.gpu, w1.gpu, nullptr, kEps, false, stream, true);
    cuda::gemv_fused(y2.gpu, y1.gpu, w2.gpu, &nw.gpu, kEps, false, stream, true);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const std::vector<double> in = staged_input(x, nullptr, t);
    for (int r = 0; r < n; ++r) {
      y1.cpu.ptr<double>()[r] = round_to(product(w1, in, r), DType::F32);
    }
    h.expect_close(y1, limit(t), "the first product");
    const std::vector<double> in2 = staged_input(y1, &nw, t);
    for (int r = 0; r < m; ++r) y2.cpu.ptr<double>()[r] = round_to(product(w2, in2, r), DType::F32);
    h.expect_close(y2, limit(t), "the second product, reading the first's output");
  }
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

// What the kernels refuse: mismatched shapes, an input too wide to stage.
TEST_F(GpuTest, FusedGemvsRefuseWhatTheyCannotRun) {
  Harness h(DType::BF16);
  const Twin x = h.input(1, 64, DType::BF16);
  const Twin w = h.input(10, 64, DType::BF16);
  const Twin y = h.output(1, 9, DType::BF16);
  EXPECT_THROW(cuda::gemv_fused(y.gpu, x.gpu, w.gpu, nullptr, kEps, false, nullptr),
               RuntimeFailure);
  const Twin act = h.output(1, 4, DType::BF16);
  const Twin nw = h.input(1, 64, DType::F32);
  EXPECT_THROW(cuda::gemv_norm_swiglu(act.gpu, x.gpu, w.gpu, nw.gpu, kEps, nullptr),
               RuntimeFailure);
  // A normalised input is the fp32 residual stream, its weight fp32.
  const Twin x32 = h.input(1, 64, DType::F32);
  const Twin y10 = h.output(1, 10, DType::F32);
  const Twin nw16 = h.input(1, 64, DType::BF16);
  EXPECT_THROW(cuda::gemv_fused(y10.gpu, x.gpu, w.gpu, &nw.gpu, kEps, false, nullptr),
               RuntimeFailure);
  EXPECT_THROW(cuda::gemv_fused(y10.gpu, x32.gpu, w.gpu, &nw16.gpu, kEps, false, nullptr),
               RuntimeFailure);
  EXPECT_FALSE(cuda::gemv_fused_fits(32768, DType::F32));
  EXPECT_TRUE(cuda::gemv_fused_fits(8192, DType::F32));
}

}  // namespace
}  // namespace tinyllama::gpu_test
