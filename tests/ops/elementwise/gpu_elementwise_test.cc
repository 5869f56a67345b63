// Elementwise ops (add, mul, SiLU, fused SwiGLU) against the float64
// reference: odd widths, padded rows, gate/up as column blocks of one
// gate_up buffer, and the in-place forms the model uses.
#include <tuple>

#include "cuda/gpu_test_util.h"
#include "ops/elementwise/cpu_elementwise.h"
#include "ops/swiglu/cpu_swiglu.h"

namespace tinyllama::gpu_test {
namespace {

// (dtype, width, pad unit). Every view's row padding is a multiple of the
// pad unit: with width 64 or 1032 and unit 8 the rows are 16-byte aligned
// (the vectorised kernels); width 37 or unit 1 gives the scalar fallback.
using ElementwiseParam = std::tuple<DType, std::int64_t, std::int64_t>;

class GpuElementwise : public GpuParamTest<ElementwiseParam> {
 protected:
  DType dtype() const { return std::get<0>(GetParam()); }
  std::int64_t cols() const { return std::get<1>(GetParam()); }
  std::int64_t pad(std::int64_t n) const { return n * std::get<2>(GetParam()); }
};

constexpr std::int64_t kRows = 33;

TEST_P(GpuElementwise, AddAndMul) {
  const DType t = dtype();
  const std::int64_t width = cols();
  Harness h(t);
  const Twin a = h.input(kRows, width, t, 1.0, pad(3));
  const Twin b = h.input(kRows, width, t, 1.0, pad(1));
  const Twin sum = h.output(kRows, width, t, pad(2));
  cpu::add(sum.cpu, a.cpu, b.cpu);
  h.gpu().add(sum.gpu, a.gpu, b.gpu);
  h.expect_close(sum, tolerance(t), "add");

  const Twin prod = h.output(kRows, width, t, pad(2));
  cpu::mul(prod.cpu, a.cpu, b.cpu);
  h.gpu().mul(prod.gpu, a.gpu, b.gpu);
  h.expect_close(prod, tolerance(t), "mul");
}

TEST_P(GpuElementwise, InPlaceAddAndMul) {
  const DType t = dtype();
  const std::int64_t width = cols();
  Harness h(t);
  // h = h + x (the residual add) and out = out * b.
  const Twin acc = h.input(kRows, width, t, 1.0, pad(4));
  const Twin x = h.input(kRows, width, t);
  cpu::add(acc.cpu, acc.cpu, x.cpu);
  h.gpu().add(acc.gpu, acc.gpu, x.gpu);
  h.expect_close(acc, tolerance(t), "add in place (out aliases a)");
  cpu::add(acc.cpu, x.cpu, acc.cpu);
  h.gpu().add(acc.gpu, x.gpu, acc.gpu);
  h.expect_close(acc, tolerance(t), "add in place (out aliases b)");
  cpu::mul(acc.cpu, acc.cpu, x.cpu);
  h.gpu().mul(acc.gpu, acc.gpu, x.gpu);
  h.expect_close(acc, tolerance(t), "mul in place");
}

TEST_P(GpuElementwise, SiluForwardBackward) {
  const DType t = dtype();
  const std::int64_t width = cols();
  Harness h(t);
  // Scale 4 reaches both saturated tails of the sigmoid.
  const Twin x = h.input(kRows, width, t, 4.0, pad(1));
  const Twin y = h.output(kRows, width, t, pad(3));
  cpu::silu_forward(y.cpu, x.cpu);
  h.gpu().silu_forward(y.gpu, x.gpu);
  h.expect_close(y, tolerance(t), "silu_forward");

  const Twin dy = h.input(kRows, width, t);
  const Twin dx = h.output(kRows, width, t, pad(2));
  cpu::silu_backward(dx.cpu, dy.cpu, x.cpu);
  h.gpu().silu_backward(dx.gpu, dy.gpu, x.gpu);
  h.expect_close(dx, tolerance(t), "silu_backward");
}

// The model's layout: gate and up are column blocks of one [N, 2F] buffer,
// d_gate and d_up column blocks of another.
TEST_P(GpuElementwise, SwigluOnColumnBlocks) {
  const DType t = dtype();
  const std::int64_t width = cols();
  Harness h(t);
  const std::int64_t f = width;
  const Twin gu = h.input(kRows, 2 * f, t, 3.0);
  const Twin gate = col_block(gu, 0, f);
  const Twin up = col_block(gu, f, f);
  const Twin hidden = h.output(kRows, f, t, pad(1));
  cpu::swiglu_forward(hidden.cpu, gate.cpu, up.cpu);
  h.gpu().swiglu_forward(hidden.gpu, gate.gpu, up.gpu);
  h.expect_close(hidden, tolerance(t), "swiglu_forward");

  const Twin dh = h.input(kRows, f, t);
  const Twin dgu = h.output(kRows, 2 * f, t);
  cpu::swiglu_backward(col_block(dgu, 0, f).cpu, col_block(dgu, f, f).cpu, dh.cpu, gate.cpu,
                       up.cpu);
  h.gpu().swiglu_backward(col_block(dgu, 0, f).gpu, col_block(dgu, f, f).gpu, dh.gpu, gate.gpu,
                          up.gpu);
  h.expect_close(col_block(dgu, 0, f), tolerance(t), "swiglu_backward d_gate");
  h.expect_close(col_block(dgu, f, f), tolerance(t), "swiglu_backward d_up");
  h.expect_close(dgu, tolerance(t), "swiglu_backward d_gate_up (whole buffer)");
}

// The unfused composition equals the fused op: silu -> mul forward and
// mul, mul -> silu_backward backward.
TEST_P(GpuElementwise, UnfusedSwigluMatchesReference) {
  const DType t = dtype();
  const std::int64_t width = cols();
  Harness h(t);
  const std::int64_t f = width;
  const Twin gu = h.input(kRows, 2 * f, t, 3.0);
  const Twin gate = col_block(gu, 0, f);
  const Twin up = col_block(gu, f, f);
  const Twin s = h.output(kRows, f, t);
  const Twin hidden = h.output(kRows, f, t);
  cpu::silu_forward(s.cpu, gate.cpu);
  cpu::mul(hidden.cpu, s.cpu, up.cpu);
  h.gpu().silu_forward(s.gpu, gate.gpu);
  h.gpu().mul(hidden.gpu, s.gpu, up.gpu);
  h.expect_close(hidden, tolerance(t), "silu then mul");

  const Twin dh = h.input(kRows, f, t);
  const Twin dgu = h.output(kRows, 2 * f, t);
  const Twin ds = h.output(kRows, f, t);
  const Twin dgate = col_block(dgu, 0, f);
  const Twin dup = col_block(dgu, f, f);
  cpu::mul(dup.cpu, dh.cpu, s.cpu);
  cpu::mul(ds.cpu, dh.cpu, up.cpu);
  cpu::silu_backward(dgate.cpu, ds.cpu, gate.cpu);
  h.gpu().mul(dup.gpu, dh.gpu, s.gpu);
  h.gpu().mul(ds.gpu, dh.gpu, up.gpu);
  h.gpu().silu_backward(dgate.gpu, ds.gpu, gate.gpu);
  h.expect_close(dgu, tolerance(t), "unfused swiglu backward");
}

std::string elementwise_name(const ::testing::TestParamInfo<ElementwiseParam>& info) {
  const auto [t, width, unit] = info.param;
  return dtype_label(t) + "_cols" + std::to_string(width) + "_pad" + std::to_string(unit);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuElementwise,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::Values<std::int64_t>(37, 64, 1032),
                                            ::testing::Values<std::int64_t>(1, 8)),
                         elementwise_name);

}  // namespace
}  // namespace tinyllama::gpu_test
