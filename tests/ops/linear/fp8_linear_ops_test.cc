// The CPU FP8 linear ops (ops/linear/cpu_fp8_linear.h): quantize_fp8_tensor
// writes the codes cpu_fp8's codec gives, in both copies, at the scale of
// the amax or the one kept; gemm_fp8_tensor computes every transpose case
// as a double GEMM of the dequantised copies it should read, and close to
// the unquantised product; and both refuse what they cannot do.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "core/narrow_float.h"
#include "core/rng.h"
#include "ops/linear/cpu_fp8.h"
#include "ops/linear/cpu_fp8_linear.h"

namespace tinyllama::testing {
namespace {

// A host tensor with both FP8 copies and its scalars.
struct HostFp8 {
  std::vector<std::uint8_t> codes, codes_t;
  std::vector<float> scalars = std::vector<float>(kFp8Scalars);
  Fp8Tensor t;
  HostFp8(Fp8Format f, std::int64_t rows, std::int64_t cols, std::int64_t pad)
      : codes(static_cast<std::size_t>(rows * (cols + pad))),
        codes_t(static_cast<std::size_t>(cols * (rows + pad))) {
    t = Fp8Tensor{f,          rows,           cols,       codes.data(),
                  cols + pad, codes_t.data(), rows + pad, scalars.data()};
  }
};

std::vector<float> random_values(std::int64_t n, Rng& rng) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) {
    do {
      x = static_cast<float>(rng.normal() * 0.7);
    } while (x == 0.0f);
  }
  return v;
}

TEST(Fp8LinearOps, QuantiseWritesTheCodecsCodesInBothCopies) {
  Rng rng(11);
  for (const Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    const std::int64_t rows = 19, cols = 37, ld = 41;
    std::vector<float> x(static_cast<std::size_t>(rows * ld), 99.0f);  // padding not read
    const std::vector<float> v = random_values(rows * cols, rng);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) x[r * ld + c] = v[r * cols + c];
    }
    HostFp8 q(f, rows, cols, 3);
    cpu::quantize_fp8_tensor(Mat(x.data(), DType::F32, rows, cols, ld), q.t, Fp8ScaleFrom::Amax);
    const double amax = cpu::amax(v.data(), v.size());
    EXPECT_EQ(q.scalars[kFp8Amax], static_cast<float>(amax));
    EXPECT_EQ(q.scalars[kFp8Scale], cpu::fp8_scale_for(amax, f));
    EXPECT_EQ(q.scalars[kFp8Inverse], cpu::fp8_inverse_scale(q.scalars[kFp8Scale]));
    std::vector<std::uint8_t> want(v.size());
    cpu::quantize_fp8(v.data(), v.size(), q.scalars[kFp8Scale], f, want.data());
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        ASSERT_EQ(q.codes[r * q.t.ld + c], want[r * cols + c]) << r << "," << c;
        ASSERT_EQ(q.codes_t[c * q.t.ld_t + r], want[r * cols + c]) << r << "," << c;
      }
    }
  }
}

// An fp32 master weight whose bf16 copy is not kept (rounds_to_bf16): the
// codes, amax and scale of that copy, which the fp32 values themselves do
// not all give (a second rounding, from fp32 straight to FP8, differs
// where fp32 -> bf16 -> FP8 rounds twice).
TEST(Fp8LinearOps, AnFp32SourceReadAsBf16GivesItsBf16CopysCodes) {
  Rng rng(12);
  const std::int64_t rows = 64, cols = 96;
  const std::vector<float> v = random_values(rows * cols, rng);
  std::vector<float> bf16(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    bf16[i] = static_cast<float>(bf16_bits_to_double(round_to_bf16_bits(v[i])));
  }
  for (const Fp8Format f : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    HostFp8 from_master(f, rows, cols, 0), from_copy(f, rows, cols, 0), plain(f, rows, cols, 0);
    from_master.t.rounds_to_bf16 = true;
    std::vector<float> master = v, copy = bf16;
    cpu::quantize_fp8_tensor(Mat(master.data(), DType::F32, rows, cols), from_master.t,
                             Fp8ScaleFrom::Amax);
    cpu::quantize_fp8_tensor(Mat(copy.data(), DType::F32, rows, cols), from_copy.t,
                             Fp8ScaleFrom::Amax);
    cpu::quantize_fp8_tensor(Mat(master.data(), DType::F32, rows, cols), plain.t,
                             Fp8ScaleFrom::Amax);
    EXPECT_EQ(from_master.scalars, from_copy.scalars);
    EXPECT_EQ(from_master.codes, from_copy.codes);
    EXPECT_EQ(from_master.codes_t, from_copy.codes_t);
    EXPECT_EQ(master, v) << "the source is read, not rounded in place";
    EXPECT_NE(plain.codes, from_copy.codes) << "fp32's own codes differ somewhere: the test bites";
  }
  std::vector<double> f64(4, 1.0);
  HostFp8 q(Fp8Format::E4M3, 2, 2, 0);
  q.t.rounds_to_bf16 = true;
  EXPECT_THROW(cpu::quantize_fp8_tensor(Mat(f64.data(), DType::F64, 2, 2), q.t, Fp8ScaleFrom::Amax),
               std::invalid_argument)
      << "only an fp32 source has a bf16 copy";
}

TEST(Fp8LinearOps, KeptScaleIsUsedAsIs) {
  Rng rng(12);
  const std::int64_t rows = 8, cols = 16;
  std::vector<float> v = random_values(rows * cols, rng);
  HostFp8 q(Fp8Format::E4M3, rows, cols, 0);
  q.scalars[kFp8Amax] = 123.0f;
  q.scalars[kFp8Scale] = 2.5f;
  q.scalars[kFp8Inverse] = 0.4f;
  cpu::quantize_fp8_tensor(Mat(v.data(), DType::F32, rows, cols), q.t, Fp8ScaleFrom::Kept);
  EXPECT_EQ(q.scalars[kFp8Amax], 123.0f);  // untouched
  std::vector<std::uint8_t> want(v.size());
  cpu::quantize_fp8(v.data(), v.size(), 2.5f, Fp8Format::E4M3, want.data());
  for (std::size_t i = 0; i < want.size(); ++i) ASSERT_EQ(q.codes[i], want[i]);
}

// c = op(a) op(b) from the copies gemm_fp8 should read: each transpose case
// against a double GEMM of the dequantised matrices, and against the
// unquantised product within the formats' error.
using Case = std::tuple<bool, bool, bool>;  // trans_a, trans_b, accumulate
class Fp8LinearGemm : public ::testing::TestWithParam<Case> {};

TEST_P(Fp8LinearGemm, MatchesTheDequantisedProduct) {
  const auto [ta, tb, accumulate] = GetParam();
  Rng rng(13);
  const std::int64_t m = 24, n = 40, k = 56;
  // a is [m, k] (or [k, m] under ta), b is [k, n] (or [n, k] under tb).
  const std::int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
  const std::vector<float> av = random_values(ar * ac, rng), bv = random_values(br * bc, rng);
  HostFp8 qa(Fp8Format::E5M2, ar, ac, 5), qb(Fp8Format::E4M3, br, bc, 2);
  cpu::quantize_fp8_tensor(Mat(const_cast<float*>(av.data()), DType::F32, ar, ac), qa.t,
                           Fp8ScaleFrom::Amax);
  cpu::quantize_fp8_tensor(Mat(const_cast<float*>(bv.data()), DType::F32, br, bc), qb.t,
                           Fp8ScaleFrom::Amax);
  const std::vector<double> c0 = [&] {
    std::vector<double> c(static_cast<std::size_t>(m * n));
    for (double& x : c) x = rng.normal();
    return c;
  }();
  std::vector<double> c = c0;
  cpu::gemm_fp8_tensor(Mat(c.data(), DType::F64, m, n), qa.t, ta, qb.t, tb, accumulate);
  auto a_at = [&](std::int64_t i, std::int64_t p) {  // op(a)(i, p), dequantised
    const std::uint8_t code = ta ? qa.codes[p * qa.t.ld + i] : qa.codes[i * qa.t.ld + p];
    return cpu::fp8_value(code, Fp8Format::E5M2) * qa.scalars[kFp8Inverse];
  };
  auto b_at = [&](std::int64_t p, std::int64_t j) {
    const std::uint8_t code = tb ? qb.codes[j * qb.t.ld + p] : qb.codes[p * qb.t.ld + j];
    return cpu::fp8_value(code, Fp8Format::E4M3) * qb.scalars[kFp8Inverse];
  };
  double worst_exact = 0, worst_true = 0, scale = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double want = 0, exact = 0, mag = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        want += a_at(i, p) * b_at(p, j);
        const double x = ta ? av[p * ac + i] : av[i * ac + p];
        const double y = tb ? bv[j * bc + p] : bv[p * bc + j];
        exact += x * y;
        mag += std::fabs(x * y);
      }
      const double base = accumulate ? c0[i * n + j] : 0.0;
      worst_exact = std::max(worst_exact, std::fabs(c[i * n + j] - base - want));
      worst_true = std::max(worst_true, std::fabs(c[i * n + j] - base - exact) / mag);
      scale = std::max(scale, mag);
    }
  }
  // The reference rounds its double sum to fp32 once (then adds c).
  EXPECT_LT(worst_exact, 1e-6 * scale);
  // Half-ulps: E5M2 errs by at most 2^-3 relative, E4M3 by 2^-4 (normal
  // values), so a product by (1 + 2^-3)(1 + 2^-4) - 1 < 0.2, and the sum by
  // under 0.2 of the sum of magnitudes (subnormals err less than that in
  // absolute terms).
  EXPECT_LT(worst_true, 0.2);
  EXPECT_GT(worst_true, 0.0);  // quantisation did happen
}

INSTANTIATE_TEST_SUITE_P(Cases, Fp8LinearGemm,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Bool()));

TEST(Fp8LinearOps, RefusesMissingCopiesAndShapes) {
  HostFp8 a(Fp8Format::E4M3, 16, 32, 0), b(Fp8Format::E4M3, 48, 32, 0);
  std::vector<float> c(16 * 48);
  const Mat cm(c.data(), DType::F32, 16, 48);
  EXPECT_NO_THROW(cpu::gemm_fp8_tensor(cm, a.t, false, b.t, true, false));
  EXPECT_THROW(cpu::gemm_fp8_tensor(cm, a.t.transposed_only(), false, b.t, true, false),
               std::invalid_argument);
  EXPECT_THROW(cpu::gemm_fp8_tensor(cm, a.t, false, b.t.direct_only(), false, false),
               std::invalid_argument);
  EXPECT_THROW(
      cpu::gemm_fp8_tensor(Mat(c.data(), DType::F32, 48, 16), a.t, false, b.t, true, false),
      std::invalid_argument);
  std::vector<float> x(16 * 31);
  EXPECT_THROW(cpu::quantize_fp8_tensor(Mat(x.data(), DType::F32, 16, 31), a.t, Fp8ScaleFrom::Amax),
               std::invalid_argument);
}

}  // namespace
}  // namespace tinyllama::testing
