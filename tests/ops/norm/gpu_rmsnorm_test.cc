// RMSNorm forward and backward against the float64 reference: odd widths,
// one row and many, padded rows; rstd in float32 and dweight in float32
// whatever the compute dtype.
#include <tuple>

#include "cuda/gpu_test_util.h"
#include "ops/norm/cpu_rmsnorm.h"
#include "ops/norm/cuda_rmsnorm.h"

namespace tinyllama::gpu_test {
namespace {

constexpr double kEps = 1e-6;

// (dtype, rows, width, pad unit). Every view's row padding is a multiple of
// the pad unit: 8 keeps 16-byte aligned rows where the width allows (the
// vectorised kernels), 1 gives odd strides (the scalar fallback). Widths
// cover the register-resident backward at 1, 2, 3 (a part-filled 4) and 4
// vectors per lane, the team kernel beyond (2048: teams of 4 warps in
// bf16/fp16, 8 in fp32; 2056: teams of 8 with part-filled vectors per
// thread, 2 of them in bf16/fp16, 4 in fp32; gpu_residual_norm_test.cc adds
// 4104) and the shared-memory fallback (odd widths);
// 9000 rows give every warp or team several rows (every grid is capped at
// the blocks resident at once, and at 1056 blocks).
// The backward runs again with the teams off: the one-warp kernels they
// replaced at long rows stay checked.
using RmsParam = std::tuple<DType, std::int64_t, std::int64_t, std::int64_t>;

class GpuRmsnorm : public GpuParamTest<RmsParam> {};

TEST_P(GpuRmsnorm, ForwardAndBackward) {
  const auto [t, rows, d, u] = GetParam();
  Harness h(t);
  ModelConfig cfg;
  cfg.hidden_dim = static_cast<int>(d);
  h.prepare(cfg, BatchShape{1, static_cast<int>(rows)}, "v1");

  // x with a non-zero mean and a spread of row scales.
  const Twin x = h.input(rows, d, t, 2.0, 3 * u, 0.5);
  const Twin w = h.input(1, d, t, 0.3, 0, 1.0);
  const Twin y = h.output(rows, d, t, 1 * u);
  const Twin rstd = h.output(rows, 1, DType::F32);
  cpu::rmsnorm_forward(y.cpu, rstd.cpu, x.cpu, w.cpu, kEps);
  h.gpu().rmsnorm_forward(y.gpu, rstd.gpu, x.gpu, w.gpu, kEps);
  h.expect_close(rstd, tolerance(DType::F32), "rmsnorm rstd (float32)");
  h.expect_close(y, tolerance(t), "rmsnorm_forward");
  // ActivationsImpl::RecomputeNorms: the output remade from the saved rstd
  // is the forward's, to the bit.
  const Twin again = h.output(rows, d, t, 2 * u);
  h.gpu().rmsnorm_apply(again.gpu, x.gpu, w.gpu, rstd.gpu);
  EXPECT_EQ(h.device_values(again.gpu), h.device_values(y.gpu)) << "rmsnorm_apply";

  // Backward from the reference's rstd on both sides, so only the backward
  // kernel is measured.
  const Twin saved = h.copy_of(rstd.cpu, DType::F32);
  const Twin dy = h.input(rows, d, t, 1.0, 2 * u);
  const Twin dx = h.output(rows, d, t, 5 * u);
  const Twin dw = h.output(1, d, DType::F32);
  cpu::rmsnorm_backward(dx.cpu, dw.cpu, dy.cpu, x.cpu, w.cpu, saved.cpu);
  for (const bool teams : {true, false}) {
    SCOPED_TRACE(teams ? "team kernel where rows are long" : "one-warp kernels only");
    KernelPins pins;
    pins.norm_long_rows = teams ? NormLongRows::Teams : NormLongRows::OneWarp;
    h.prepare(cfg, BatchShape{1, static_cast<int>(rows)}, "v1", pins);
    h.gpu().rmsnorm_backward(dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, saved.gpu);
    h.expect_close(dx, tolerance(t), "rmsnorm_backward dx");
    // dweight sums exactly-shared inputs in fp32: the fp32 tolerance (x100
    // for the long sums over many rows).
    h.expect_close(dw, 1e-4, "rmsnorm_backward dweight (float32)");

    // dweight is overwritten, not accumulated: a second call gives the same.
    h.gpu().rmsnorm_backward(dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, saved.gpu);
    h.expect_close(dw, 1e-4, "rmsnorm_backward dweight, second call");
  }
}

std::string rms_name(const ::testing::TestParamInfo<RmsParam>& info) {
  const auto [t, rows, d, u] = info.param;
  return dtype_label(t) + "_rows" + std::to_string(rows) + "_D" + std::to_string(d) + "_pad" +
         std::to_string(u);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuRmsnorm,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::Values<std::int64_t>(1, 7, 100, 600, 9000),
                                            ::testing::Values<std::int64_t>(37, 200, 512, 776, 1024,
                                                                            1029, 2048, 2056),
                                            ::testing::Values<std::int64_t>(1, 8)),
                         rms_name);

// The weight gradient's partial rows added in the backward kernel's last
// blocks (small grids) or by a second kernel: the same bits, for dx too,
// with and without the residual gradient; three calls in a row give the
// same (each leaves the arrival counters at zero for the next). Grids of
// 1, 75 and 263 blocks of 8 warps (fewer and more than the 16 reducing
// blocks, and near the largest in-kernel grid) at widths of 2 to 16 slices
// of 32 columns; at D 2056 the team kernel (a team of 8 warps a block, as
// many blocks as are resident), and at 2100 rows the second kernel either
// way (the one-warp grid there, 420 blocks, is past the in-kernel sum's).
using SumParam = std::tuple<DType, std::int64_t, std::int64_t>;
class GpuRmsnormPartialSums : public GpuParamTest<SumParam> {};

TEST_P(GpuRmsnormPartialSums, InKernelGivesTheSecondKernelsBits) {
  const auto [t, rows, d] = GetParam();
  Harness h(t);
  ModelConfig cfg;
  cfg.hidden_dim = static_cast<int>(d);
  h.prepare(cfg, BatchShape{1, static_cast<int>(rows)}, "v1");
  const Twin x = h.input(rows, d, t, 2.0, 0, 0.5);
  const Twin w = h.input(1, d, t, 0.3, 0, 1.0);
  const Twin rstd = h.output(rows, 1, DType::F32);
  const Twin y = h.output(rows, d, t);
  h.gpu().rmsnorm_forward(y.gpu, rstd.gpu, x.gpu, w.gpu, kEps);
  const Twin dy = h.input(rows, d, t, 1.0, 0);
  const Twin dres = h.input(rows, d, t, 0.7, 0);
  for (const bool with_residual : {false, true}) {
    auto run = [&](const Twin& dx, const Twin& dw) {
      if (with_residual) {
        h.gpu().rmsnorm_backward_add(dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, rstd.gpu, dres.gpu);
      } else {
        h.gpu().rmsnorm_backward(dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, rstd.gpu);
      }
    };
    // The backend prepared with the plan's choice each way.
    auto prepare = [&](NormWeightSum sum) {
      KernelPins pins;
      pins.norm_weight_sum = sum;
      h.prepare(cfg, BatchShape{1, static_cast<int>(rows)}, "v1", pins);
    };
    const Twin dx_sep = h.output(rows, d, t);
    const Twin dw_sep = h.output(1, d, DType::F32);
    prepare(NormWeightSum::SecondKernel);
    run(dx_sep, dw_sep);
    const auto want_dw = h.device_values(dw_sep.gpu);
    // Not zeros: a reduction that never ran would leave the output's fill.
    EXPECT_NE(want_dw, std::vector<double>(want_dw.size(), 0.0));
    prepare(NormWeightSum::InKernelWhereSmall);
    for (int call = 0; call < 3; ++call) {
      const Twin dx = h.output(rows, d, t);
      const Twin dw = h.output(1, d, DType::F32);
      run(dx, dw);
      EXPECT_EQ(h.device_values(dw.gpu), want_dw)
          << "dweight, call " << call << (with_residual ? ", with the residual" : "");
      EXPECT_EQ(h.device_values(dx.gpu), h.device_values(dx_sep.gpu))
          << "dx, call " << call << (with_residual ? ", with the residual" : "");
    }
  }
}

std::string sum_name(const ::testing::TestParamInfo<SumParam>& info) {
  const auto [t, rows, d] = info.param;
  return dtype_label(t) + "_rows" + std::to_string(rows) + "_D" + std::to_string(d);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuRmsnormPartialSums,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::Values<std::int64_t>(3, 600, 2100),
                                            ::testing::Values<std::int64_t>(37, 512, 2056)),
                         sum_name);

// The kernel bench warms an op up eagerly and then records it in a graph. A
// norm backward whose partial rows are summed on the side branch (v2's
// parallel branches, a grid past the in-kernel sum) leaves that sum
// unjoined after the eager call; the recording must not wait on it (a wait
// inside a capture on an event recorded outside it fails the capture), and
// the replayed graph computes what the reference does.
class GpuRmsnormCapture : public GpuTest {};

TEST_F(GpuRmsnormCapture, RecordsAfterAnEagerCallWithItsSumOnTheSideBranch) {
  const DType t = DType::BF16;
  const std::int64_t rows = 9000;
  const std::int64_t d = 512;
  ASSERT_TRUE(
      cuda::rmsnorm_backward_sums_in_second_kernel(rows, d, NormWeightSum::InKernelWhereSmall));
  Harness h(t);
  ModelConfig cfg;
  cfg.hidden_dim = static_cast<int>(d);
  const BatchShape shape{1, static_cast<int>(rows)};
  ASSERT_TRUE(test_plan("v2", precision_for(t), h.gpu(), cfg, shape).parallel_branches);
  h.prepare(cfg, shape, "v2");
  const Twin x = h.input(rows, d, t, 2.0, 0, 0.5);
  const Twin w = h.input(1, d, t, 0.3, 0, 1.0);
  const Twin rstd = h.output(rows, 1, DType::F32);
  const Twin y = h.output(rows, d, t);
  cpu::rmsnorm_forward(y.cpu, rstd.cpu, x.cpu, w.cpu, kEps);
  const Twin saved = h.copy_of(rstd.cpu, DType::F32);
  const Twin dy = h.input(rows, d, t, 1.0, 0);
  const Twin dx = h.output(rows, d, t);
  const Twin dw = h.output(1, d, DType::F32);
  cpu::rmsnorm_backward(dx.cpu, dw.cpu, dy.cpu, x.cpu, w.cpu, saved.cpu);

  const Twin dx_eager = h.output(rows, d, t);
  const Twin dw_eager = h.output(1, d, DType::F32);
  h.gpu().rmsnorm_backward(dx_eager.gpu, dw_eager.gpu, dy.gpu, x.gpu, w.gpu, saved.gpu);
  h.gpu().begin_capture();
  h.gpu().rmsnorm_backward(dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, saved.gpu);
  ASSERT_NO_THROW(h.gpu().end_capture(/*instantiate=*/true, 0));
  h.gpu().replay(0);
  h.gpu().synchronize();
  h.expect_close(dx, tolerance(t), "rmsnorm_backward dx, replayed");
  h.expect_close(dw, 1e-4, "rmsnorm_backward dweight (float32), replayed");
}

}  // namespace
}  // namespace tinyllama::gpu_test
