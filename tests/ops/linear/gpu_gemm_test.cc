// cuBLASLt GEMM against the float64 reference: every transpose combination,
// odd shapes, padded and misaligned row strides, column blocks of a wider
// buffer as the output, alpha/beta, the residual epilogue (d = a b + c into
// another buffer), and a float32 output from bf16/fp16 operands (weight
// gradients under AMP).
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/gpu_test_util.h"
#include "ops/elementwise/cpu_elementwise.h"
#include "ops/linear/cpu_gemm.h"

namespace tinyllama::gpu_test {
namespace {

struct GemmShape {
  std::int64_t m, n, k;
};

const GemmShape kShapes[] = {{37, 53, 29}, {1, 7, 100}, {64, 1, 3}, {130, 96, 257}};

// (dtype of a and b, dtype of c, trans_a, trans_b)
using GemmParam = std::tuple<DType, DType, bool, bool>;

class GpuGemm : public GpuParamTest<GemmParam> {};

// An operand stored so that op() of it is rows x cols, with a row padding of
// 3 elements: rows then start on 2- or 4-byte boundaries only, which the
// cuBLASLt alignment hints must allow for.
Twin operand(Harness& h, bool trans, std::int64_t rows, std::int64_t cols, DType t) {
  return trans ? h.input(cols, rows, t, 1.0, 3) : h.input(rows, cols, t, 1.0, 3);
}

TEST_P(GpuGemm, MatchesReference) {
  const auto [ab_type, c_type, ta, tb] = GetParam();
  Harness h(ab_type);
  h.prepare(ModelConfig{}, BatchShape{2, 16}, "v1");
  // Inputs are rounded identically on both sides and the GPU accumulates in
  // fp32, so a wide (fp32) output is held to the fp32 tolerance.
  const double tol = tolerance(c_type);
  for (const GemmShape& s : kShapes) {
    SCOPED_TRACE("m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                 " k=" + std::to_string(s.k));
    const Twin a = operand(h, ta, s.m, s.k, ab_type);
    const Twin b = operand(h, tb, s.k, s.n, ab_type);

    // beta = 0 into a poisoned output: c must not be read.
    const Twin c0 = h.output(s.m, s.n, c_type, 5);
    cpu::gemm(c0.cpu, a.cpu, ta, b.cpu, tb, 1.0, 0.0);
    h.gpu().gemm(c0.gpu, a.gpu, ta, b.gpu, tb, 1.0f, 0.0f);
    h.expect_close(c0, tol, "gemm beta=0");

    // alpha/beta into a column block of a wider buffer: the columns around
    // the block must come through untouched (compared as part of the parent).
    const Twin parent = h.input(s.m, s.n + 11, c_type, 1.0, 2);
    const Twin c1 = col_block(parent, 4, s.n);
    cpu::gemm(c1.cpu, a.cpu, ta, b.cpu, tb, 0.75, 0.5);
    h.gpu().gemm(c1.gpu, a.gpu, ta, b.gpu, tb, 0.75f, 0.5f);
    h.expect_close(parent, tol, "gemm alpha=0.75 beta=0.5 into a column block");

    // gemm_add (GemmEpilogue::Residual): d = op(a) op(b) + c into a poisoned
    // d, with c read from its own buffer and left as it was.
    const Twin c2 = h.input(s.m, s.n, c_type, 1.0, 1);
    const Twin d2 = h.output(s.m, s.n, c_type, 1);
    cpu::gemm(d2.cpu, a.cpu, ta, b.cpu, tb, 1.0, 0.0);
    cpu::add(d2.cpu, d2.cpu, c2.cpu);
    h.gpu().gemm_add(d2.gpu, a.gpu, ta, b.gpu, tb, c2.gpu);
    h.expect_close(d2, tol, "gemm_add into a separate output");
    h.expect_close(c2, 0.0, "gemm_add's accumulated input, unchanged");
    EXPECT_TRUE(h.padding_intact(d2.gpu)) << "gemm_add wrote past a row";
  }
}

// GEMMs that leave SMs to a kernel beside them (a data-parallel step's
// gradient exchange; GemmRunner::set_sm_margin) run on a grid sized for
// fewer SMs, and must compute the same product; so must the plans of every
// SM, kept beside them. A shape of many tiles, where the grid is the SM
// count.
TEST_P(GpuGemm, LeavingSmsToAnotherKernelMatchesReference) {
  const auto [ab_type, c_type, ta, tb] = GetParam();
  Harness h(ab_type);
  h.prepare(ModelConfig{}, BatchShape{2, 16}, "v1");  // one process: no margin
  cuda::GemmRunner& runner = h.gpu().gemm_runner();
  ASSERT_EQ(runner.sm_margin(), 0);
  runner.set_sm_margin(9);
  const double tol = tolerance(c_type);
  for (const GemmShape& s : {GemmShape{1031, 777, 515}, kShapes[3]}) {
    SCOPED_TRACE("m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) +
                 " k=" + std::to_string(s.k));
    const Twin a = operand(h, ta, s.m, s.k, ab_type);
    const Twin b = operand(h, tb, s.k, s.n, ab_type);
    const Twin c = h.input(s.m, s.n, c_type, 1.0, 1);
    cpu::gemm(c.cpu, a.cpu, ta, b.cpu, tb, 0.75, 0.5);
    h.gpu().gemm(c.gpu, a.gpu, ta, b.gpu, tb, 0.75f, 0.5f);
    h.expect_close(c, tol, "gemm with 9 SMs left");
    runner.set_sm_margin(0);
    const Twin again = h.input(s.m, s.n, c_type, 1.0, 2);
    cpu::gemm(again.cpu, a.cpu, ta, b.cpu, tb, 0.75, 0.5);
    h.gpu().gemm(again.gpu, a.gpu, ta, b.gpu, tb, 0.75f, 0.5f);
    h.expect_close(again, tol, "gemm with every SM after it");
    runner.set_sm_margin(9);
  }
  runner.set_sm_margin(0);
}

std::string gemm_name(const ::testing::TestParamInfo<GemmParam>& info) {
  const auto [ab, c, ta, tb] = info.param;
  return dtype_label(ab) + "_to_" + dtype_label(c) + (ta ? "_aT" : "_aN") + (tb ? "_bT" : "_bN");
}

// Every (a/b dtype, c dtype) pair the model uses, with all four transposes.
std::vector<GemmParam> gemm_params() {
  const std::pair<DType, DType> types[] = {{DType::F32, DType::F32},
                                           {DType::BF16, DType::BF16},
                                           {DType::F16, DType::F16},
                                           {DType::BF16, DType::F32},
                                           {DType::F16, DType::F32}};
  std::vector<GemmParam> out;
  for (const auto& [ab, c] : types) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) out.emplace_back(ab, c, ta, tb);
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GpuGemm, ::testing::ValuesIn(gemm_params()), gemm_name);

// The model's unfused levels: three GEMMs on row blocks of one fused weight
// into column blocks of one activation buffer, and accumulation with beta = 1.
class GpuGemmSlices : public GpuParamTest<DType> {};

TEST_P(GpuGemmSlices, RowBlocksOfWeightIntoColumnBlocks) {
  const DType t = GetParam();
  Harness h(t);
  h.prepare(ModelConfig{}, BatchShape{2, 16}, "v1");
  const std::int64_t tokens = 33, d = 48, qd = 48, kvd = 24;
  const Twin x = h.input(tokens, d, t);
  const Twin w = h.input(qd + 2 * kvd, d, t, 0.1);
  const Twin qkv = h.output(tokens, qd + 2 * kvd, t);
  const std::int64_t starts[3] = {0, qd, qd + kvd};
  const std::int64_t widths[3] = {qd, kvd, kvd};
  for (int i = 0; i < 3; ++i) {
    const Twin out = col_block(qkv, starts[i], widths[i]);
    const Mat wc = w.cpu.row_block(starts[i], widths[i]);
    const Mat wg = w.gpu.row_block(starts[i], widths[i]);
    cpu::gemm(out.cpu, x.cpu, false, wc, true, 1.0, 0.0);
    h.gpu().gemm(out.gpu, x.gpu, false, wg, true, 1.0f, 0.0f);
  }
  h.expect_close(qkv, tolerance(t), "qkv by three sliced GEMMs");

  // d_x = sum_i d_part_i * W_i, accumulated with beta = 1 after the first.
  const Twin dqkv = h.input(tokens, qd + 2 * kvd, t);
  const Twin dx = h.output(tokens, d, t);
  for (int i = 0; i < 3; ++i) {
    const Twin part = col_block(dqkv, starts[i], widths[i]);
    const Mat wc = w.cpu.row_block(starts[i], widths[i]);
    const Mat wg = w.gpu.row_block(starts[i], widths[i]);
    cpu::gemm(dx.cpu, part.cpu, false, wc, false, 1.0, i == 0 ? 0.0 : 1.0);
    h.gpu().gemm(dx.gpu, part.gpu, false, wg, false, 1.0f, i == 0 ? 0.0f : 1.0f);
  }
  h.expect_close(dx, tolerance(t), "dx accumulated over three slices");

  // Weight gradient row blocks, fp32 from the compute dtype.
  const Twin dw = h.output(qd + 2 * kvd, d, DType::F32);
  for (int i = 0; i < 3; ++i) {
    const Twin part = col_block(dqkv, starts[i], widths[i]);
    const Mat dwc = dw.cpu.row_block(starts[i], widths[i]);
    const Mat dwg = dw.gpu.row_block(starts[i], widths[i]);
    cpu::gemm(dwc, part.cpu, true, x.cpu, false, 1.0, 0.0);
    h.gpu().gemm(dwg, part.gpu, true, x.gpu, false, 1.0f, 0.0f);
  }
  h.expect_close(dw, tolerance(DType::F32), "dW row blocks in float32");
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuGemmSlices, ::testing::ValuesIn(gpu_dtypes()),
                         [](const auto& info) { return dtype_label(info.param); });

// fp32 GEMMs must be true fp32, not TF32. a = 1 + s * 2^-12 with s = +-1
// and b = 1: every partial sum is exact in fp32 in any order, while TF32
// (10-bit mantissa) rounds a to 1. After subtracting k, fp32 leaves
// 2^-12 * sum(s) exactly and TF32 leaves 0.
TEST_F(GpuTest, GemmFloat32IsNotTF32) {
  Harness h(DType::F32);
  h.prepare(ModelConfig{}, BatchShape{2, 16}, "v1");
  const std::int64_t m = 64, n = 32, k = 256;
  std::vector<double> av(static_cast<std::size_t>(m * k));
  for (double& v : av) v = 1.0 + (h.rng().below(2) ? 1.0 : -1.0) * 0x1p-12;
  const Twin a = h.from_values(m, k, DType::F32, av);
  const Twin b = h.from_values(k, n, DType::F32, std::vector<double>(k * n, 1.0));
  const Twin ones = h.from_values(m, 1, DType::F32, std::vector<double>(m, 1.0));
  const Twin minus_k =
      h.from_values(1, n, DType::F32, std::vector<double>(n, -static_cast<double>(k)));
  const Twin c = h.output(m, n, DType::F32);
  cpu::gemm(c.cpu, a.cpu, false, b.cpu, false, 1.0, 0.0);
  h.gpu().gemm(c.gpu, a.gpu, false, b.gpu, false, 1.0f, 0.0f);
  cpu::gemm(c.cpu, ones.cpu, false, minus_k.cpu, false, 1.0, 1.0);
  h.gpu().gemm(c.gpu, ones.gpu, false, minus_k.gpu, false, 1.0f, 1.0f);
  h.expect_close(c, tolerance(DType::F32), "fp32 GEMM residual (TF32 would leave zeros)");
}

// Autotuning times candidate algorithms at a problem's first use. An
// accumulating GEMM (beta = 1) must still add alpha*a*b to c exactly once
// (its candidates run on the autotune scratch), a beta = 0 GEMM must come out
// right although its candidates wrote into c, and later calls (the cached
// choice) must give the first call's bits. Both candidate lists: the
// heuristic's ranking and the wide search (split-K variants included).
class GpuGemmAutotune : public GpuParamTest<std::tuple<DType, bool>> {};

// Elements whose stored values differ (NaN never equals: a poisoned one counts).
std::int64_t differing(const std::vector<double>& x, const std::vector<double>& y) {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < x.size(); ++i) n += x[i] == y[i] ? 0 : 1;
  return n;
}

TEST_P(GpuGemmAutotune, FirstUseIsCorrectAndRepeatsBitForBit) {
  const auto [t, wide] = GetParam();
  cuda::GemmRunner::forget_tuned_choices();  // time here, not reuse another test's choice
  Harness h(t);
  cuda::GemmRunner& runner = h.gpu().gemm_runner();
  runner.set_autotune(true);  // whatever TINYLLAMA_GEMM_AUTOTUNE says; before prepare()
  runner.set_wide_search(wide);
  h.prepare(ModelConfig{}, BatchShape{2, 16}, "v1");
  const std::int64_t m = 200, n = 136, k = 328;
  const double tol = tolerance(t);
  const Twin a = h.input(m, k, t);
  const Twin b = h.input(n, k, t, 1.0, 3);  // used transposed; padded rows
  const std::vector<double> start = Harness::host_values(h.input(m, n, t).cpu);
  const int tuned_before = runner.tuned_problems();

  // beta = 1: first use (timed), then the same problem from the same start.
  const Twin acc1 = h.from_values(m, n, t, start);
  cpu::gemm(acc1.cpu, a.cpu, false, b.cpu, true, 0.75, 1.0);
  h.gpu().gemm(acc1.gpu, a.gpu, false, b.gpu, true, 0.75f, 1.0f);
  h.expect_close(acc1, tol, "autotuned gemm beta=1, first use");
  const Twin acc2 = h.from_values(m, n, t, start);
  h.gpu().gemm(acc2.gpu, a.gpu, false, b.gpu, true, 0.75f, 1.0f);
  EXPECT_EQ(differing(h.device_values(acc2.gpu), h.device_values(acc1.gpu)), 0)
      << "a repeated beta=1 GEMM changed bits";

  // beta = 0 into a poisoned output: a problem of its own, timed into c.
  const Twin out1 = h.output(m, n, t);
  cpu::gemm(out1.cpu, a.cpu, false, b.cpu, true, 1.0, 0.0);
  h.gpu().gemm(out1.gpu, a.gpu, false, b.gpu, true, 1.0f, 0.0f);
  h.expect_close(out1, tol, "autotuned gemm beta=0, first use");
  const Twin out2 = h.output(m, n, t);
  h.gpu().gemm(out2.gpu, a.gpu, false, b.gpu, true, 1.0f, 0.0f);
  EXPECT_EQ(differing(h.device_values(out2.gpu), h.device_values(out1.gpu)), 0)
      << "a repeated beta=0 GEMM changed bits";

  EXPECT_EQ(runner.tuned_problems() - tuned_before, 2)
      << "both problems should have been timed at their first use";

  // A second backend of the process reuses the choices: the same bits again.
  Harness h2(t);
  h2.gpu().gemm_runner().set_autotune(true);
  h2.prepare(ModelConfig{}, BatchShape{2, 16}, "v1");
  const Twin a2 = h2.from_values(m, k, t, Harness::host_values(a.cpu));
  const Twin b2 = h2.from_values(n, k, t, Harness::host_values(b.cpu), 3);
  const Twin acc3 = h2.from_values(m, n, t, start);
  h2.gpu().gemm(acc3.gpu, a2.gpu, false, b2.gpu, true, 0.75f, 1.0f);
  EXPECT_EQ(differing(h2.device_values(acc3.gpu), h.device_values(acc1.gpu)), 0)
      << "another backend's beta=1 GEMM changed bits";
  EXPECT_EQ(h2.gpu().gemm_runner().tuned_problems(), 0) << "the choice should have been reused";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuGemmAutotune,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()), ::testing::Bool()),
                         [](const auto& info) {
                           return dtype_label(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_wide" : "_ranked");
                         });

}  // namespace
}  // namespace tinyllama::gpu_test
