// NormImpl::Fused's two kernels against the float64 reference composed from
// the unfused ops (an add, then the norm; the norm's backward, then the add):
// odd widths, one row and many, padded rows, the register paths of the
// forward (1 to 8 vectors per lane) and the reread path beyond, and the
// in-place forms the model uses (the sum over one of its inputs, the input
// gradient over the residual gradient).
#include <tuple>
#include <vector>

#include "cuda/gpu_test_util.h"
#include "ops/convert/cpu_convert.h"
#include "ops/elementwise/cpu_elementwise.h"
#include "ops/norm/cpu_rmsnorm.h"

namespace tinyllama::gpu_test {
namespace {

constexpr double kEps = 1e-6;

// (dtype, rows, width, pad unit): as in gpu_rmsnorm_test.cc. Widths: 37 (odd,
// scalar path), 200 (one vector per lane at most), 776 and 1024 (4 and 8
// fp32 vectors), 2048 (8 bf16 vectors: the backward's team kernel), 4104
// (past the forward's register paths; the backward's teams of 8 warps in
// bf16/fp16, the shared-memory fallback in fp32).
using NormParam = std::tuple<DType, std::int64_t, std::int64_t, std::int64_t>;

class GpuResidualNorm : public GpuParamTest<NormParam> {};

// The reference sum: a + b rounded to the activation dtype, as stored; the
// norm reads it as stored.
std::vector<double> rounded_sum(const Twin& a, const Twin& b, DType t) {
  const std::vector<double> av = Harness::host_values(a.cpu);
  const std::vector<double> bv = Harness::host_values(b.cpu);
  std::vector<double> s(av.size());
  for (std::size_t i = 0; i < s.size(); ++i) s[i] = round_to(av[i] + bv[i], t);
  return s;
}

TEST_P(GpuResidualNorm, AddNormForwardMatchesAddThenNorm) {
  const auto [t, rows, d, u] = GetParam();
  Harness h(t);
  ModelConfig cfg;
  cfg.hidden_dim = static_cast<int>(d);
  h.prepare(cfg, BatchShape{1, static_cast<int>(rows)}, "v3");

  // A residual stream with a non-zero mean and a sublayer output of its own scale.
  const Twin a = h.input(rows, d, t, 2.0, 3 * u, 0.5);
  const Twin b = h.input(rows, d, t, 0.7, 2 * u, -0.2);
  const Twin w = h.input(1, d, t, 0.3, 0, 1.0);
  const Twin sum = h.from_values(rows, d, t, rounded_sum(a, b, t), u);
  const Twin y = h.output(rows, d, t, u);
  const Twin rstd = h.output(rows, 1, DType::F32);
  cpu::rmsnorm_forward(y.cpu, rstd.cpu, sum.cpu, w.cpu, kEps);

  // Out of place: sum written to its own buffer.
  h.poison(sum.gpu);
  h.gpu().add_rmsnorm_forward(sum.gpu, y.gpu, rstd.gpu, a.gpu, b.gpu, w.gpu, kEps);
  h.expect_close(sum, tolerance(t), "add_rmsnorm_forward sum");
  h.expect_close(y, tolerance(t), "add_rmsnorm_forward out");
  h.expect_close(rstd, tolerance(DType::F32), "add_rmsnorm_forward rstd (float32)");
  // ActivationsImpl::RecomputeNorms: the norm remade from the stored sum and
  // rstd is the fused kernel's output, to the bit.
  const Twin again = h.output(rows, d, t, 2 * u);
  h.gpu().rmsnorm_apply(again.gpu, sum.gpu, w.gpu, rstd.gpu);
  EXPECT_EQ(h.device_values(again.gpu), h.device_values(y.gpu)) << "rmsnorm_apply after add";

  // In place, as the model runs it: the sum over the sublayer's output.
  const Twin stream = h.copy_of(b.cpu, t, 2 * u);
  const Twin y2 = h.output(rows, d, t, u);
  const Twin rstd2 = h.output(rows, 1, DType::F32);
  h.gpu().add_rmsnorm_forward(stream.gpu, y2.gpu, rstd2.gpu, a.gpu, stream.gpu, w.gpu, kEps);
  cpu::add(stream.cpu, a.cpu, b.cpu);
  cpu::convert(y2.cpu, y.cpu);
  cpu::convert(rstd2.cpu, rstd.cpu);
  h.expect_close(stream, tolerance(t), "add_rmsnorm_forward in place: sum");
  h.expect_close(y2, tolerance(t), "add_rmsnorm_forward in place: out");
  h.expect_close(rstd2, tolerance(DType::F32), "add_rmsnorm_forward in place: rstd");
}

TEST_P(GpuResidualNorm, BackwardAddMatchesNormBackwardThenAdd) {
  const auto [t, rows, d, u] = GetParam();
  Harness h(t);
  ModelConfig cfg;
  cfg.hidden_dim = static_cast<int>(d);
  h.prepare(cfg, BatchShape{1, static_cast<int>(rows)}, "v3");

  const Twin x = h.input(rows, d, t, 2.0, 3 * u, 0.5);
  const Twin w = h.input(1, d, t, 0.3, 0, 1.0);
  const Twin y = h.output(rows, d, t, u);
  const Twin rstd = h.output(rows, 1, DType::F32);
  cpu::rmsnorm_forward(y.cpu, rstd.cpu, x.cpu, w.cpu, kEps);
  const Twin saved = h.copy_of(rstd.cpu, DType::F32);

  const Twin dy = h.input(rows, d, t, 1.0, 2 * u);
  // The residual gradient at the norm gradient's scale, so neither hides the other.
  const Twin dres = h.input(rows, d, t, 0.5, u);
  const Twin dx = h.output(rows, d, t, 5 * u);
  const Twin dw = h.output(1, d, DType::F32);
  const Twin norm_grad = h.output(rows, d, t);
  cpu::rmsnorm_backward(norm_grad.cpu, dw.cpu, dy.cpu, x.cpu, w.cpu, saved.cpu);
  cpu::add(dx.cpu, dres.cpu, norm_grad.cpu);
  h.gpu().rmsnorm_backward_add(dx.gpu, dw.gpu, dy.gpu, x.gpu, w.gpu, saved.gpu, dres.gpu);
  h.expect_close(dx, tolerance(t), "rmsnorm_backward_add dx");
  h.expect_close(dw, 1e-4, "rmsnorm_backward_add dweight (float32)");

  // In place over the residual gradient, as the model runs it.
  const Twin d_stream = h.copy_of(dres.cpu, t, 2 * u);
  const Twin dw2 = h.output(1, d, DType::F32);
  h.gpu().rmsnorm_backward_add(d_stream.gpu, dw2.gpu, dy.gpu, x.gpu, w.gpu, saved.gpu,
                               d_stream.gpu);
  cpu::convert(d_stream.cpu, dx.cpu);
  cpu::convert(dw2.cpu, dw.cpu);
  h.expect_close(d_stream, tolerance(t), "rmsnorm_backward_add in place: dx");
  h.expect_close(dw2, 1e-4, "rmsnorm_backward_add in place: dweight");
}

std::string norm_name(const ::testing::TestParamInfo<NormParam>& info) {
  const auto [t, rows, d, u] = info.param;
  return dtype_label(t) + "_rows" + std::to_string(rows) + "_D" + std::to_string(d) + "_pad" +
         std::to_string(u);
}

// Every width at a few rows; many rows (several per warp: the grid is capped)
// at two widths, which keeps the host-side reference of the suite short.
std::vector<NormParam> norm_params() {
  std::vector<NormParam> out;
  for (DType t : gpu_dtypes()) {
    for (std::int64_t pad : {1, 8}) {
      for (std::int64_t rows : {1, 7, 600}) {
        for (std::int64_t d : {37, 200, 776, 1024, 2048, 4104}) out.emplace_back(t, rows, d, pad);
      }
      for (std::int64_t d : {200, 1024, 2048}) out.emplace_back(t, 9000, d, pad);
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuResidualNorm, ::testing::ValuesIn(norm_params()), norm_name);

}  // namespace
}  // namespace tinyllama::gpu_test
