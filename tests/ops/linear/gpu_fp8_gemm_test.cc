// The FP8 GEMM on cuBLASLt (ops/linear/cuda_gemm_fp8.h) against
// cpu::gemm_fp8_reference on the same codes and scales: every format pair
// the FP8 linear layers use (E4M3 x E4M3 forward, E5M2 x E4M3 and
// E4M3 x E5M2 for the gradients), bf16 and fp32 outputs, shapes that are
// multiples of 16 but not of 128, a padded row stride on a, accumulation
// (beta = 1), fast accumulation, the amax of D, and the problems it must
// refuse with a reason.
//
// Two kinds of check:
//   - exact: operands of small integer codes (+-1, +-2) and power-of-two
//     dequantisation factors make every partial sum an integer below 2^13,
//     exact in any accumulator with at least 13 fraction bits, and the
//     factors exact: the GPU must equal the reference bit for bit, bf16
//     output included (both round the same exact value to nearest even);
//   - bounded: random operands quantised by the CPU path, within the error
//     bound derived at fp8_error_bound below.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gpu_fp8_util.h"
#include "ops/linear/cpu_fp8.h"
#include "ops/linear/cuda_gemm_fp8.h"

namespace tinyllama::gpu_test {
namespace {

struct GemmShape {
  std::int64_t m, n, k;
};

const GemmShape kShapes[] = {{16, 16, 16}, {48, 80, 112}, {1040, 2064, 528}};

struct FormatPair {
  Fp8Format a, b;
};

const FormatPair kPairs[] = {{Fp8Format::E4M3, Fp8Format::E4M3},
                             {Fp8Format::E5M2, Fp8Format::E4M3},
                             {Fp8Format::E4M3, Fp8Format::E5M2}};

// cuBLASLt's workspace, as the backend gives GemmRunner.
constexpr std::size_t kWorkspaceBytes = 32u << 20;

// One FP8 operand on both sides: its codes (row-major, ld), its scale, and
// the device copy with its dequantisation factor.
struct Operand {
  std::int64_t rows = 0, cols = 0, ld = 0;
  Fp8Format format = Fp8Format::E4M3;
  float scale = 1.0f;
  std::vector<std::uint8_t> codes;  // rows * ld, padding 0
  DeviceMem mem;
  DeviceMem dequant;

  Operand(std::int64_t r, std::int64_t c, std::int64_t stride, Fp8Format f)
      : rows(r),
        cols(c),
        ld(stride),
        format(f),
        codes(static_cast<std::size_t>(r * stride), 0),
        mem(codes.size()),
        dequant(sizeof(float)) {}

  void upload() {
    mem.upload(codes.data(), codes.size());
    const float inv = cpu::fp8_inverse_scale(scale);
    dequant.upload(&inv, sizeof(inv));
  }
  cpu::Fp8Matrix cpu() const { return cpu::Fp8Matrix{codes.data(), ld, format, scale}; }
  cuda::Fp8Operand gpu() const {
    return cuda::Fp8Operand{mem.get(), rows, cols, ld, format, dequant.get<float>()};
  }
  // The same magnitudes with every sign cleared (bit 7 is the sign in both
  // formats): the reference GEMM on these gives sum_k |a||b| * dequant.
  cpu::Fp8Matrix abs_cpu(std::vector<std::uint8_t>& store) const {
    store = codes;
    for (auto& c : store) c &= 0x7f;
    return cpu::Fp8Matrix{store.data(), ld, format, scale};
  }
};

// Random values quantised by the CPU path (amax, scale, quantize_fp8).
void fill_random(Operand& op, Rng& rng) {
  const std::vector<float> v =
      random_values(static_cast<std::size_t>(op.rows * op.cols), 1.0, DType::F32, rng);
  op.scale = cpu::fp8_scale_for(cpu::amax(v.data(), v.size()), op.format);
  for (std::int64_t r = 0; r < op.rows; ++r) {
    cpu::quantize_fp8(v.data() + r * op.cols, static_cast<std::size_t>(op.cols), op.scale,
                      op.format, op.codes.data() + r * op.ld);
  }
  op.upload();
}

// Codes of +-1 and +-2 (exact in both formats), never zero, with a
// power-of-two scale.
void fill_small_integers(Operand& op, Rng& rng, float scale) {
  const double values[] = {1.0, -1.0, 2.0, -2.0};
  for (std::int64_t r = 0; r < op.rows; ++r) {
    for (std::int64_t c = 0; c < op.cols; ++c) {
      const double v = values[rng.below(4)];
      op.codes[static_cast<std::size_t>(r * op.ld + c)] =
          op.format == Fp8Format::E4M3 ? round_to_e4m3_bits(v) : round_to_e5m2_bits(v);
    }
  }
  op.scale = scale;
  op.upload();
}

// The device output as doubles (row-major, no padding).
std::vector<double> download_output(const DeviceMem& c, std::int64_t m, std::int64_t n, DType t) {
  std::vector<double> out(static_cast<std::size_t>(m * n));
  if (t == DType::F32) {
    const auto v = c.download<float>(out.size());
    std::copy(v.begin(), v.end(), out.begin());
  } else {
    const auto v = c.download<std::uint16_t>(out.size());
    for (std::size_t i = 0; i < v.size(); ++i) out[i] = bf16_bits_to_double(v[i]);
  }
  return out;
}

// The bound |gpu - exact| for one element of the bounded check.
//   S = sum_k |a_k| |b_k| * dequant_a * dequant_b (the reference on the
//   codes with their signs cleared).
//   - fp32 accumulation (the brief's model): each product of two FP8 values
//     is exact in fp32 (at most 4 x 4 significant bits, exponents far
//     inside fp32's), each of the K additions rounds by at most 2^-24 of a
//     partial sum, and every partial sum is at most S in magnitude:
//     K 2^-24 S. Applying the two factors (their product, then the scaling
//     of the sum) rounds twice more and the reference's fp32 store once:
//     3 2^-24 S. Together (K + 3) 2^-24 S.
//   - Hopper's FP8 MMA (not documented by NVIDIA; DeepSeek-V3 measured
//     about 14 significant bits on H800): between promotions to fp32 the
//     tensor core adds products aligned to the largest exponent present,
//     keeping at least 13 fraction bits, so each addition loses at most
//     2^-13 of a magnitude no larger than the promoted chunk's sum of
//     |products|, S_chunk. With P additions per chunk: P 2^-13 S_chunk, and
//     P 2^-13 S over all chunks. P is cuBLASLt's promotion interval, taken
//     as kPromotionInterval; with fast accumulation nothing is promoted
//     until the end: P = K.
//   - bf16 output: rounding the fp32 result to nearest bf16 moves it by at
//     most half a bf16 ulp, 2^-8 of its magnitude (8 significant bits),
//     which is at most |exact| + the error above.
constexpr double kPromotionInterval = 128;

double fp32_accumulation_bound(double s, std::int64_t k) {
  return static_cast<double>(k + 3) * std::ldexp(s, -24);
}

double fp8_error_bound(double exact, double s, std::int64_t k, bool fast_accum, DType out) {
  const double p = fast_accum ? static_cast<double>(k) : std::min<double>(kPromotionInterval, k);
  const double before_store = fp32_accumulation_bound(s, k) + p * std::ldexp(s, -13);
  const double store = out == DType::BF16 ? std::ldexp(std::fabs(exact) + before_store, -8) : 0;
  return before_store + store;
}

using GemmParam = std::tuple<FormatPair, DType, GemmShape>;

class GpuFp8Gemm : public Fp8GpuParamTest<GemmParam> {
 protected:
  void SetUp() override {
    Fp8GpuParamTest<GemmParam>::SetUp();
    if (IsSkipped()) return;
    runner_ = std::make_unique<cuda::Fp8GemmRunner>();
    workspace_ = std::make_unique<DeviceMem>(kWorkspaceBytes, 0);
    runner_->set_workspace(workspace_->get(), kWorkspaceBytes);
  }

  std::unique_ptr<cuda::Fp8GemmRunner> runner_;
  std::unique_ptr<DeviceMem> workspace_;
};

// The reference (unrounded fp32) and S per element.
struct Expected {
  std::vector<float> exact, abs_sum;
};

Expected reference(const GemmShape& s, const Operand& a, const Operand& b) {
  Expected e;
  e.exact.resize(static_cast<std::size_t>(s.m * s.n));
  e.abs_sum.resize(e.exact.size());
  cpu::gemm_fp8_reference(s.m, s.n, s.k, a.cpu(), b.cpu(), e.exact.data(), s.n, false);
  std::vector<std::uint8_t> abs_a, abs_b;
  cpu::gemm_fp8_reference(s.m, s.n, s.k, a.abs_cpu(abs_a), b.abs_cpu(abs_b), e.abs_sum.data(), s.n,
                          false);
  return e;
}

// Checks got against the bound; reports the worst ratio to the bound and to
// the pure fp32-accumulation bound (whether cuBLASLt's result is as good as
// fp32 accumulation is worth seeing, not a requirement).
void expect_within_bound(const std::vector<double>& got, const Expected& e, std::int64_t k,
                         bool fast_accum, DType out, const std::string& what) {
  std::int64_t over = 0;
  double worst = 0, worst_fp32 = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double exact = e.exact[i], s = e.abs_sum[i];
    const double err = std::fabs(got[i] - exact);
    const double bound = fp8_error_bound(exact, s, k, fast_accum, out);
    if (!(err <= bound)) ++over;  // NaN (an unwritten element) counts
    worst = std::max(worst, err / bound);
    const double store = out == DType::BF16 ? std::ldexp(std::fabs(exact), -8) : 0;
    worst_fp32 = std::max(worst_fp32, err / (fp32_accumulation_bound(s, k) + store));
  }
  EXPECT_EQ(over, 0) << what << ": elements beyond the bound (worst error/bound " << worst << ")";
  std::printf("[ fp8 gemm ] %s: worst error/bound %.3g, error/(fp32-accumulation bound) %.3g\n",
              what.c_str(), worst, worst_fp32);
}

TEST_P(GpuFp8Gemm, RandomOperandsWithinTheBound) {
  const auto [pair, out, s] = GetParam();
  Rng rng(20261128 + static_cast<std::uint64_t>(s.k));
  Operand a(s.m, s.k, s.k + 16, pair.a);  // a padded row stride
  Operand b(s.n, s.k, s.k, pair.b);
  fill_random(a, rng);
  fill_random(b, rng);
  const Expected e = reference(s, a, b);
  for (const bool fast : {false, true}) {
    DeviceMem c(static_cast<std::size_t>(s.m * s.n) * dtype_size(out));  // poisoned
    cuda::Fp8GemmOptions options;
    options.fast_accum = fast;
    runner_->run(Mat(c.get(), out, s.m, s.n), a.gpu(), b.gpu(), options);
    expect_within_bound(download_output(c, s.m, s.n, out), e, s.k, fast, out,
                        fast ? "fast accumulation" : "promoted accumulation");
  }
}

// c = a b^T exactly, then c += a b^T exactly (beta = 1), then the same sum
// into another buffer.
TEST_P(GpuFp8Gemm, SmallIntegersExactWithAccumulate) {
  const auto [pair, out, s] = GetParam();
  Rng rng(99 + static_cast<std::uint64_t>(s.n));
  Operand a(s.m, s.k, s.k, pair.a);
  Operand b(s.n, s.k, s.k + 32, pair.b);
  fill_small_integers(a, rng, 8.0f);   // dequant 2^-3
  fill_small_integers(b, rng, 0.25f);  // dequant 2^2
  const Expected e = reference(s, a, b);
  DeviceMem c(static_cast<std::size_t>(s.m * s.n) * dtype_size(out));
  for (const bool fast : {false, true}) {
    SCOPED_TRACE(fast ? "fast accumulation" : "promoted accumulation");
    cuda::Fp8GemmOptions options;
    options.fast_accum = fast;
    runner_->run(Mat(c.get(), out, s.m, s.n), a.gpu(), b.gpu(), options);
    const std::vector<double> got = download_output(c, s.m, s.n, out);
    std::int64_t wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) wrong += got[i] != round_to(e.exact[i], out);
    EXPECT_EQ(wrong, 0) << "elements differing from the exact product";

    options.accumulate = true;
    runner_->run(Mat(c.get(), out, s.m, s.n), a.gpu(), b.gpu(), options);
    const std::vector<double> twice = download_output(c, s.m, s.n, out);
    wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      wrong += twice[i] != round_to(got[i] + e.exact[i], out);
    }
    EXPECT_EQ(wrong, 0) << "c + a b^T (beta = 1) differs from the exact sum";

    // The addend read from another buffer (cuBLASLt's C apart from its D,
    // LinearOps::gemm_fp8_add): d = c + a b^T, c left as it was.
    DeviceMem d(c.bytes());
    options.addend = c.get();
    runner_->run(Mat(d.get(), out, s.m, s.n), a.gpu(), b.gpu(), options);
    const std::vector<double> sum = download_output(d, s.m, s.n, out);
    wrong = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      wrong += sum[i] != round_to(twice[i] + e.exact[i], out);
    }
    EXPECT_EQ(wrong, 0) << "addend + a b^T differs from the exact sum";
    EXPECT_EQ(download_output(c, s.m, s.n, out), twice) << "the addend was written";
  }
}

// GEMMs that leave SMs to a kernel beside them (Fp8GemmOptions::sm_margin:
// the backward pass of a data-parallel step, beside the gradient
// reduce-scatter) run on a grid sized for fewer SMs and must compute the
// same product: exact on small integers, within the bound on random codes.
// The largest shape has more tiles than SMs, so the grid is the SM count.
TEST_P(GpuFp8Gemm, LeavingSmsToAnotherKernelKeepsTheProduct) {
  const auto [pair, out, s] = GetParam();
  Rng rng(31 + static_cast<std::uint64_t>(s.m));
  Operand a(s.m, s.k, s.k, pair.a);
  Operand b(s.n, s.k, s.k, pair.b);
  fill_small_integers(a, rng, 8.0f);
  fill_small_integers(b, rng, 0.25f);
  const Expected exact = reference(s, a, b);
  DeviceMem c(static_cast<std::size_t>(s.m * s.n) * dtype_size(out));
  cuda::Fp8GemmOptions options;
  options.sm_margin = 9;
  runner_->run(Mat(c.get(), out, s.m, s.n), a.gpu(), b.gpu(), options);
  const std::vector<double> got = download_output(c, s.m, s.n, out);
  std::int64_t wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) wrong += got[i] != round_to(exact.exact[i], out);
  EXPECT_EQ(wrong, 0) << "elements differing from the exact product, 9 SMs left";

  fill_random(a, rng);
  fill_random(b, rng);
  const Expected e = reference(s, a, b);
  runner_->run(Mat(c.get(), out, s.m, s.n), a.gpu(), b.gpu(), options);
  expect_within_bound(download_output(c, s.m, s.n, out), e, s.k, false, out, "9 SMs left");
}

std::string gemm_name(const ::testing::TestParamInfo<GemmParam>& info) {
  const auto& [pair, out, s] = info.param;
  return std::string(format_label(pair.a)) + "x" + format_label(pair.b) + "_to_" +
         dtype_label(out) + "_" + std::to_string(s.m) + "x" + std::to_string(s.n) + "x" +
         std::to_string(s.k);
}

INSTANTIATE_TEST_SUITE_P(Formats, GpuFp8Gemm,
                         ::testing::Combine(::testing::ValuesIn(kPairs),
                                            ::testing::Values(DType::BF16, DType::F32),
                                            ::testing::ValuesIn(kShapes)),
                         gemm_name);

// What the runner refuses, host-side and with the reason (no GPU needed).
TEST(Fp8GemmProblems, RefusedWithAReason) {
  alignas(256) static unsigned char buf[4096];
  const auto op = [&](std::int64_t rows, std::int64_t cols, std::int64_t ld, Fp8Format f,
                      std::size_t offset = 0) {
    return cuda::Fp8Operand{buf + offset, rows, cols, ld, f, nullptr};
  };
  const Fp8Format e4 = Fp8Format::E4M3, e5 = Fp8Format::E5M2;
  const Mat c(buf, DType::BF16, 32, 16);
  const auto why = [&](const Mat& cc, const cuda::Fp8Operand& a, const cuda::Fp8Operand& b) {
    return cuda::fp8_gemm_problem_error(cc, a, b);
  };
  EXPECT_EQ(why(c, op(32, 48, 48, e4), op(16, 48, 48, e4)), "");
  EXPECT_EQ(why(c, op(32, 48, 48, e5), op(16, 48, 48, e4)), "");
  EXPECT_NE(why(c, op(32, 48, 48, e5), op(16, 48, 48, e5)).find("E5M2 x E5M2"), std::string::npos);
  EXPECT_NE(why(c, op(32, 40, 48, e4), op(16, 40, 48, e4)).find("multiples of 16"),
            std::string::npos);
  EXPECT_NE(why(c, op(32, 48, 56, e4), op(16, 48, 48, e4)).find("row strides"), std::string::npos);
  EXPECT_NE(why(c, op(32, 48, 48, e4, 8), op(16, 48, 48, e4)).find("16-byte"), std::string::npos);
  EXPECT_NE(why(c, op(32, 48, 48, e4), op(16, 32, 32, e4)).find("do not chain"), std::string::npos);
  EXPECT_NE(why(Mat(buf, DType::F64, 32, 16), op(32, 48, 48, e4), op(16, 48, 48, e4))
                .find("bfloat16, float16 or float32"),
            std::string::npos);
  EXPECT_NE(why(Mat(buf, DType::BF16, 32, 16, 20), op(32, 48, 48, e4), op(16, 48, 48, e4))
                .find("multiple of 16 bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace tinyllama::gpu_test
