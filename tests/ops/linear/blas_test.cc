// The fast CPU path (cpu_blas.h) against the reference loops: OpenBLAS's
// fp32 GEMM on every transpose, on strided views, split over threads by
// rows and by columns, with alpha and beta; the BLAS attention forward and
// backward, with probs and with lse only, under GQA. Both sides read the
// same fp32 inputs; the reference sums in double, BLAS in fp32, so they
// agree to fp32 rounding over the reduction (limits below). Skipped in a
// build without a BLAS.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/rng.h"
#include "ops/attention/cpu_attention.h"
#include "ops/linear/cpu_blas.h"
#include "ops/linear/cpu_gemm.h"

namespace tinyllama::testing {
namespace {

// fp32 sums of up to ~1000 terms of unit-scale products: a relative error
// (max |a - b| / max |b|) of ~1e-6 is expected; 1e-5 is the parity bar.
constexpr double kFp32Tolerance = 1e-5;

struct F32 {
  std::int64_t rows, cols;
  std::vector<float> v;
  F32(std::int64_t r, std::int64_t c) : rows(r), cols(c), v(static_cast<std::size_t>(r * c)) {}
  Mat mat() { return Mat(v.data(), DType::F32, rows, cols); }
};

F32 random_f32(std::int64_t rows, std::int64_t cols, Rng& rng) {
  F32 t(rows, cols);
  for (float& x : t.v) {
    do {
      x = static_cast<float>(rng.normal());
    } while (x == 0.0f);
  }
  return t;
}

double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return diff / scale;
}

#define SKIP_WITHOUT_BLAS() \
  if (!cpu::blas_available()) GTEST_SKIP() << "this build has no BLAS (cpu_blas.h)"

struct GemmCase {
  bool ta, tb;
  std::int64_t m, n, k;
};

class BlasGemm : public ::testing::TestWithParam<GemmCase> {};

// Every operand a column block of a wider buffer (row stride > width), c
// started from random values so beta matters.
TEST_P(BlasGemm, MatchesReferenceLoopsOnStridedViews) {
  SKIP_WITHOUT_BLAS();
  const GemmCase p = GetParam();
  Rng rng(3);
  F32 a_buf = p.ta ? random_f32(p.k, p.m + 5, rng) : random_f32(p.m, p.k + 5, rng);
  F32 b_buf = p.tb ? random_f32(p.n, p.k + 3, rng) : random_f32(p.k, p.n + 3, rng);
  F32 c0 = random_f32(p.m, p.n + 7, rng);
  const Mat a = a_buf.mat().col_block(2, p.ta ? p.m : p.k);
  const Mat b = b_buf.mat().col_block(1, p.tb ? p.k : p.n);
  for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.7f, 0.3f}}) {
    F32 want = c0, got = c0;
    cpu::gemm(want.mat().col_block(4, p.n), a, p.ta, b, p.tb, alpha, beta);
    cpu::blas_gemm(got.mat().col_block(4, p.n), a, p.ta, b, p.tb, alpha, beta);
    EXPECT_LT(rel_err(got.v, want.v), kFp32Tolerance) << "alpha " << alpha << " beta " << beta;
    // The columns outside the view are untouched.
    for (std::int64_t i = 0; i < p.m; ++i) {
      for (std::int64_t j : {0, 1, 2, 3})
        ASSERT_EQ(got.v[i * (p.n + 7) + j], c0.v[i * (p.n + 7) + j]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BlasGemm,
    ::testing::Values(GemmCase{false, false, 300, 37, 65}, GemmCase{true, false, 300, 37, 65},
                      GemmCase{false, true, 300, 37, 65}, GemmCase{true, true, 300, 37, 65},
                      // wider than tall: split over columns
                      GemmCase{false, false, 21, 400, 70}, GemmCase{true, true, 21, 400, 70},
                      GemmCase{false, true, 3, 5, 2}),
    [](const auto& info) {
      const GemmCase& p = info.param;
      return std::string(p.ta ? "T" : "N") + (p.tb ? "T" : "N") + "_" + std::to_string(p.m) + "x" +
             std::to_string(p.n) + "x" + std::to_string(p.k);
    });

TEST(BlasGemm, BetaZeroNeverReadsC) {
  SKIP_WITHOUT_BLAS();
  Rng rng(4);
  F32 a = random_f32(64, 48, rng), b = random_f32(48, 80, rng);
  F32 want(64, 80), got(64, 80);
  std::fill(got.v.begin(), got.v.end(), std::numeric_limits<float>::quiet_NaN());
  cpu::gemm(want.mat(), a.mat(), false, b.mat(), false, 1.0, 0.0);
  cpu::blas_gemm(got.mat(), a.mat(), false, b.mat(), false, 1.0f, 0.0f);
  EXPECT_LT(rel_err(got.v, want.v), kFp32Tolerance);
}

TEST(BlasGemm, EmptyInnerDimensionScalesC) {
  SKIP_WITHOUT_BLAS();
  Rng rng(5);
  F32 c = random_f32(4, 3, rng);
  const std::vector<float> before = c.v;
  F32 a(4, 0), b(0, 3);
  cpu::blas_gemm(c.mat(), a.mat(), false, b.mat(), false, 1.0f, 0.5f);
  for (std::size_t i = 0; i < before.size(); ++i) EXPECT_EQ(c.v[i], 0.5f * before[i]);
}

TEST(BlasGemm, RefusesMismatchedShapesAndOtherDtypes) {
  SKIP_WITHOUT_BLAS();
  F32 a(4, 5), b(6, 3), c(4, 3);
  EXPECT_THROW(cpu::blas_gemm(c.mat(), a.mat(), false, b.mat(), false, 1.0f, 0.0f),
               std::invalid_argument);
  std::vector<double> d(12);
  F32 a2(4, 6);
  EXPECT_THROW(
      cpu::blas_gemm(Mat(d.data(), DType::F64, 4, 3), a2.mat(), false, b.mat(), false, 1.0f, 0.0f),
      std::invalid_argument);
}

struct AttnCase {
  int batch, seq, heads, kv_heads, head_dim;
  bool with_probs;
};

class BlasAttention : public ::testing::TestWithParam<AttnCase> {};

TEST_P(BlasAttention, ForwardAndBackwardMatchReference) {
  SKIP_WITHOUT_BLAS();
  const AttnCase p = GetParam();
  const AttentionShape s{p.batch, p.seq, p.heads, p.kv_heads, p.head_dim};
  const std::int64_t tokens = std::int64_t{p.batch} * p.seq;
  const std::int64_t qd = std::int64_t{p.heads} * p.head_dim;
  const std::int64_t kvd = std::int64_t{p.kv_heads} * p.head_dim;
  Rng rng(7);
  // q, k, v as column blocks of one fused buffer, as the model passes them.
  F32 qkv = random_f32(tokens, qd + 2 * kvd, rng);
  F32 dout = random_f32(tokens, qd, rng);
  const Mat q = qkv.mat().col_block(0, qd), k = qkv.mat().col_block(qd, kvd),
            v = qkv.mat().col_block(qd + kvd, kvd);
  const std::int64_t bh = std::int64_t{p.batch} * p.heads;

  struct Run {
    F32 out, lse, probs, dqkv;
  };
  auto run = [&](bool blas) {
    Run r{F32(tokens, qd), F32(bh, p.seq), F32(p.with_probs ? bh * p.seq : 0, p.seq),
          F32(tokens, qd + 2 * kvd)};
    const Mat probs = p.with_probs ? r.probs.mat() : Mat();
    const Mat dq = r.dqkv.mat().col_block(0, qd), dk = r.dqkv.mat().col_block(qd, kvd),
              dv = r.dqkv.mat().col_block(qd + kvd, kvd);
    // dk, dv start as garbage: the backward pass must overwrite them.
    std::fill(r.dqkv.v.begin(), r.dqkv.v.end(), 1e3f);
    if (blas) {
      cpu::attention_forward_blas(r.out.mat(), r.lse.mat(), probs, q, k, v, s);
      cpu::attention_backward_blas(dq, dk, dv, dout.mat(), q, k, v, r.lse.mat(), probs, s);
    } else {
      cpu::attention_forward(r.out.mat(), r.lse.mat(), probs, q, k, v, s);
      cpu::attention_backward(dq, dk, dv, dout.mat(), q, k, v, r.lse.mat(), probs, s);
    }
    return r;
  };
  const Run want = run(false);
  const Run got = run(true);
  EXPECT_LT(rel_err(got.out.v, want.out.v), kFp32Tolerance) << "out";
  EXPECT_LT(rel_err(got.lse.v, want.lse.v), kFp32Tolerance) << "lse";
  if (p.with_probs) {
    EXPECT_LT(rel_err(got.probs.v, want.probs.v), kFp32Tolerance) << "probs";
  }
  auto block = [&](const F32& m, std::int64_t c0, std::int64_t n) {
    std::vector<float> out;
    for (std::int64_t i = 0; i < tokens; ++i) {
      for (std::int64_t j = 0; j < n; ++j) out.push_back(m.v[i * m.cols + c0 + j]);
    }
    return out;
  };
  EXPECT_LT(rel_err(block(got.dqkv, 0, qd), block(want.dqkv, 0, qd)), kFp32Tolerance) << "dq";
  EXPECT_LT(rel_err(block(got.dqkv, qd, kvd), block(want.dqkv, qd, kvd)), kFp32Tolerance) << "dk";
  EXPECT_LT(rel_err(block(got.dqkv, qd + kvd, kvd), block(want.dqkv, qd + kvd, kvd)),
            kFp32Tolerance)
      << "dv";
}

INSTANTIATE_TEST_SUITE_P(Shapes, BlasAttention,
                         ::testing::Values(AttnCase{2, 37, 4, 2, 8, false},
                                           AttnCase{2, 37, 4, 2, 8, true},
                                           AttnCase{1, 70, 3, 3, 16, false},
                                           AttnCase{3, 19, 4, 1, 6, true}),
                         [](const auto& info) {
                           const AttnCase& p = info.param;
                           return "B" + std::to_string(p.batch) + "S" + std::to_string(p.seq) +
                                  "H" + std::to_string(p.heads) + "K" + std::to_string(p.kv_heads) +
                                  "hd" + std::to_string(p.head_dim) +
                                  (p.with_probs ? "_probs" : "_lse");
                         });

}  // namespace
}  // namespace tinyllama::testing
