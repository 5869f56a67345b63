// The gradient norm and clipping's coefficient (Backend::sum_squares,
// clip_by_norm) against sums in double on the host, on awkward sizes (one
// element, one block's worth, more than the fixed grid covers in one pass),
// padded 2-D views and each float dtype; the same bits on every run; and
// AdamW reading the coefficient and the decay group from the staged scalars
// against the CPU reference.
#include <cmath>

#include "cuda/gpu_test_util.h"
#include "ops/optimizer/cpu_adamw.h"
#include "ops/optimizer/cpu_grad_norm.h"

namespace tinyllama::gpu_test {
namespace {

struct NormCase {
  std::int64_t rows, cols, pad;
  DType dtype;
};

class GpuSumSquares : public GpuParamTest<NormCase> {};

double* device_acc(Harness& h) {
  const std::size_t bytes = (1 + Backend::kSumSquaresScratch) * sizeof(double);
  void* p = h.gpu().allocate(bytes);
  h.gpu().fill_zero(p, bytes);
  return static_cast<double*>(p);
}

double read_acc(Harness& h, const double* acc) {
  double v = 0;
  h.gpu().download(&v, acc, sizeof v);
  return v;
}

TEST_P(GpuSumSquares, MatchesDoubleSumsAndRepeatsBitForBit) {
  const NormCase c = GetParam();
  Harness h(DType::F32);
  const Twin x = h.input(c.rows, c.cols, c.dtype, 0.7, c.pad, 0.1);
  double want = 0;
  for (double v : Harness::host_values(x.cpu)) want += v * v;
  double* acc = device_acc(h);
  h.gpu().sum_squares(x.gpu, acc);
  const double got = read_acc(h, acc);
  // Each thread sums its grid-stride share in fp32 (m terms: relative error
  // up to m ulps of fp32), the rest is double.
  const std::int64_t n = c.rows * c.cols;
  const std::int64_t threads = std::min<std::int64_t>(n, Backend::kSumSquaresScratch * 256);
  const double per_thread = std::ceil(static_cast<double>(n) / static_cast<double>(threads));
  EXPECT_NEAR(got, want, (per_thread + 2) * 0x1p-24 * want);
  // Accumulates; and the same input gives the same bits.
  h.gpu().sum_squares(x.gpu, acc);
  const double twice = read_acc(h, acc);
  EXPECT_EQ(twice, got + got);
  double* again = device_acc(h);
  h.gpu().sum_squares(x.gpu, again);
  EXPECT_EQ(read_acc(h, again), got);
  h.gpu().release(acc);
  h.gpu().release(again);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuSumSquares,
                         ::testing::Values(NormCase{1, 1, 0, DType::F32},
                                           NormCase{1, 256, 0, DType::F32},
                                           NormCase{13, 517, 3, DType::F32},
                                           NormCase{1, (1 << 20) * 3 + 13, 0, DType::F32},
                                           NormCase{61, 4099, 0, DType::BF16},
                                           NormCase{29, 333, 5, DType::F16}));

class GpuClipByNorm : public GpuTest {};

TEST_F(GpuClipByNorm, NormOfTheUnscaledGradientAndTorchsCoefficient) {
  Harness h(DType::F32);
  for (double max_norm : {0.0, 0.5, 100.0}) {
    SCOPED_TRACE("max_norm " + std::to_string(max_norm));
    double* acc = device_acc(h);
    const double sumsq = 36.0 * 65536.0 * 65536.0;  // gradients scaled by 2^16, norm 6
    h.gpu().upload(acc, &sumsq, sizeof sumsq);
    StepScalars s{};
    s.unscale = 1.0 / 65536.0;
    s.clip = 1.0;
    auto* step = static_cast<StepScalars*>(h.gpu().allocate(sizeof s));
    h.gpu().upload(step, &s, sizeof s);
    auto* norm = static_cast<float*>(h.gpu().allocate(sizeof(float)));
    h.gpu().clip_by_norm(acc, max_norm, step, norm);
    float got_norm = 0;
    h.gpu().download(&got_norm, norm, sizeof got_norm);
    StepScalars after{};
    h.gpu().download(&after, step, sizeof after);
    EXPECT_EQ(got_norm, 6.0f);
    const double want = max_norm > 0 ? std::min(1.0, max_norm / (6.0 + 1e-6)) : 1.0;
    EXPECT_EQ(after.clip, want);
    // The CPU reference computes the same.
    StepScalars cpu_step = s;
    float cpu_norm = 0;
    cpu::clip_by_norm(&sumsq, max_norm, &cpu_step, &cpu_norm);
    EXPECT_EQ(cpu_step.clip, after.clip);
    EXPECT_EQ(cpu_norm, got_norm);
    for (void* p : {static_cast<void*>(acc), static_cast<void*>(step), static_cast<void*>(norm)})
      h.gpu().release(p);
  }
}

// The fused sweep with the staged scalars: the clip coefficient multiplies
// the gradient, and a tensor outside the decay group is not decayed.
class GpuAdamWRecipe : public GpuTest {};

TEST_F(GpuAdamWRecipe, ClipCoefficientAndDecayGroupFromTheScalars) {
  for (bool decay : {true, false}) {
    SCOPED_TRACE(decay ? "decay" : "no decay");
    Harness h(DType::F32);
    const std::int64_t n = 4099;
    const Twin p = h.input(1, n, DType::F32, 0.5, 0, 1.0);
    const Twin g = h.input(1, n, DType::F32, 1.0);
    const Twin m = h.input(1, n, DType::F32, 0.01);
    const Twin v = h.from_values(1, n, DType::F32, std::vector<double>(n, 1e-4));
    AdamWHyper hp;
    hp.lr = 1e-2f;
    hp.weight_decay = 0.1f;
    hp.step = 3;
    hp.apply_decay = decay;
    StepScalars s = make_step_scalars(hp, 1.0f, 64);
    s.clip = 0.37;
    auto* staged = static_cast<StepScalars*>(h.gpu().allocate(sizeof s));
    h.gpu().upload(staged, &s, sizeof s);
    AdamWHyper device_hp = hp;
    device_hp.scalars = staged;
    h.gpu().adamw_fused(p.gpu, g.gpu, m.gpu, v.gpu, Mat(), device_hp);
    cpu::adamw(p.cpu, g.cpu, m.cpu, v.cpu, hp, s.clip);
    h.expect_close(m, tolerance(DType::F32), "first moment");
    h.expect_close(v, tolerance(DType::F32), "second moment");
    h.expect_close(p, tolerance(DType::F32), "parameters");
    h.gpu().release(staged);
  }
}

}  // namespace
}  // namespace tinyllama::gpu_test
