// RMSNorm forward and backward against the float64 reference: odd widths,
// one row and many, padded rows; rstd in float32 and dweight in float32
// whatever the compute dtype.
#include <tuple>

#include "cpu/cpu_ops.h"
#include "gpu_test_util.h"

namespace tinyllama::gpu_test {
namespace {

constexpr double kEps = 1e-6;

// (dtype, rows, width, pad unit). Every view's row padding is a multiple of
// the pad unit: 8 keeps 16-byte aligned rows where the width allows (the
// vectorised kernels), 1 gives odd strides (the scalar fallback). Widths
// cover the register-resident backward at 1, 2, 3 (a part-filled 4) and 4
// vectors per lane, and the shared-memory fallback beyond; 9000 rows give
// every warp several rows (the grid is capped at 1056 blocks of 8 warps).
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
  h.gpu().rmsnorm_backward(dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, saved.gpu);
  h.expect_close(dx, tolerance(t), "rmsnorm_backward dx");
  // dweight sums exactly-shared inputs in fp32: the fp32 tolerance (x100 for
  // the long sums over many rows).
  h.expect_close(dw, 1e-4, "rmsnorm_backward dweight (float32)");

  // dweight is overwritten, not accumulated: a second call gives the same.
  h.gpu().rmsnorm_backward(dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, saved.gpu);
  h.expect_close(dw, 1e-4, "rmsnorm_backward dweight, second call");
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
                                                                            1029, 2056),
                                            ::testing::Values<std::int64_t>(1, 8)),
                         rms_name);

}  // namespace
}  // namespace tinyllama::gpu_test
