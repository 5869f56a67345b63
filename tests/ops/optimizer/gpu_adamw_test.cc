// AdamW against the closed form of torch.optim.AdamW (evaluated here in
// double) and against the CPU reference op, over several steps, on a flat
// parameter and on a padded 2-D view. The parameter update is compared
// relative to its own size, not to the parameters', so a wrong update cannot
// hide behind a large parameter.
#include <cmath>

#include "cuda/gpu_test_util.h"
#include "ops/optimizer/cpu_adamw.h"

namespace tinyllama::gpu_test {
namespace {

struct State {
  std::vector<double> p, m, v;
};

// One step of PyTorch's AdamW (single-tensor path), in double.
void closed_form_step(State& s, const std::vector<double>& g, const AdamWHyper& hp) {
  const double b1 = hp.beta1, b2 = hp.beta2;
  const double bc1 = 1.0 - std::pow(b1, hp.step);
  const double bc2 = 1.0 - std::pow(b2, hp.step);
  for (std::size_t i = 0; i < s.p.size(); ++i) {
    s.p[i] *= 1.0 - static_cast<double>(hp.lr) * hp.weight_decay;
    s.m[i] = b1 * s.m[i] + (1.0 - b1) * g[i];
    s.v[i] = b2 * s.v[i] + (1.0 - b2) * g[i] * g[i];
    const double denom = std::sqrt(s.v[i]) / std::sqrt(bc2) + hp.eps;
    s.p[i] -= hp.lr / bc1 * s.m[i] / denom;
  }
}

class GpuAdamW : public GpuParamTest<std::int64_t> {};

TEST_P(GpuAdamW, MatchesClosedFormOverSteps) {
  const std::int64_t pad = GetParam();
  Harness h(DType::F32);
  const std::int64_t rows = 7, cols = 129;
  const std::size_t n = static_cast<std::size_t>(rows * cols);

  // The run starts from zero moments, like a fresh optimizer.
  State ref;
  ref.p.resize(n);
  for (double& x : ref.p) x = round_to(0.02 * h.rng().normal(), DType::F32);
  ref.m.assign(n, 0.0);
  ref.v.assign(n, 0.0);
  const Twin p = h.from_values(rows, cols, DType::F32, ref.p, pad);
  const Twin m = h.from_values(rows, cols, DType::F32, ref.m, pad);
  const Twin v = h.from_values(rows, cols, DType::F32, ref.v, pad);

  AdamWHyper hp;
  hp.lr = 1e-2f;  // large enough that the update is far above fp32 rounding of p
  hp.weight_decay = 0.1f;
  for (int step = 1; step <= 5; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    hp.step = step;
    const Twin g = h.input(rows, cols, DType::F32, step == 3 ? 1e-6 : 1.0, pad);
    const std::vector<double> before = h.device_values(p.gpu);
    closed_form_step(ref, Harness::host_values(g.cpu), hp);
    cpu::adamw(p.cpu, g.cpu, m.cpu, v.cpu, hp);
    h.gpu().adamw(p.gpu, g.gpu, m.gpu, v.gpu, hp);

    const std::vector<double> after = h.device_values(p.gpu);
    const std::vector<double> cpu_after = Harness::host_values(p.cpu);
    double err = 0, size = 0, cpu_err = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double want = ref.p[i] - before[i];
      err = std::max(err, std::abs((after[i] - before[i]) - want));
      cpu_err = std::max(cpu_err, std::abs(cpu_after[i] - ref.p[i]));
      size = std::max(size, std::abs(want));
    }
    ASSERT_GT(size, 0.0);
    EXPECT_LE(err / size, 1e-4) << "parameter update vs closed form";
    EXPECT_LE(cpu_err / size, 1e-6) << "the CPU reference itself vs closed form";
    h.expect_close(m, tolerance(DType::F32), "first moment");
    h.expect_close(v, tolerance(DType::F32), "second moment");
    h.expect_close(p, tolerance(DType::F32), "parameters");
    // Keep the host copies in step with the device's, so that each step
    // measures one update.
    ref.p = after;
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        p.cpu.ptr<double>()[r * p.cpu.ld + c] = after[static_cast<std::size_t>(r * cols + c)];
      }
    }
    ref.m = h.device_values(m.gpu);
    ref.v = h.device_values(v.gpu);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        const auto i = static_cast<std::size_t>(r * cols + c);
        m.cpu.ptr<double>()[r * m.cpu.ld + c] = ref.m[i];
        v.cpu.ptr<double>()[r * v.cpu.ld + c] = ref.v[i];
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, GpuAdamW, ::testing::Values<std::int64_t>(0, 3),
                         [](const auto& info) {
                           return info.param == 0 ? std::string("Contiguous")
                                                  : std::string("PaddedRows");
                         });

// With zero gradient and zero moments only the decoupled weight decay acts.
TEST_F(GpuTest, AdamWZeroGradientIsPureDecay) {
  Harness h(DType::F32);
  const std::int64_t n = 1000;
  const Twin p = h.input(1, n, DType::F32);
  const std::vector<double> zeros(static_cast<std::size_t>(n), 0.0);
  const Twin g = h.from_values(1, n, DType::F32, zeros);
  const Twin m = h.from_values(1, n, DType::F32, zeros);
  const Twin v = h.from_values(1, n, DType::F32, zeros);
  AdamWHyper hp;
  hp.lr = 0.5f;
  hp.weight_decay = 0.2f;
  hp.step = 1;
  const std::vector<double> before = Harness::host_values(p.cpu);
  h.gpu().adamw(p.gpu, g.gpu, m.gpu, v.gpu, hp);
  const std::vector<double> after = h.device_values(p.gpu);
  for (std::size_t i = 0; i < before.size(); ++i) {
    ASSERT_NEAR(after[i], before[i] * (1.0 - 0.5 * 0.2), 1e-6 * std::abs(before[i]) + 1e-30)
        << "element " << i;
  }
}

// fp16 loss scaling: the gradient arrives multiplied by grad_scale and the
// step divides it out; a set skip flag (device memory) skips the step.
TEST_F(GpuTest, AdamWUnscalesAndSkipsOnFlag) {
  Harness h(DType::F32);
  const std::int64_t rows = 3, cols = 77;
  const Twin p = h.input(rows, cols, DType::F32, 0.02);
  const Twin m = h.input(rows, cols, DType::F32, 0.01);
  std::vector<double> vv(static_cast<std::size_t>(rows * cols));
  for (double& x : vv) x = 1e-4 * (1.0 + h.rng().uniform());
  const Twin v = h.from_values(rows, cols, DType::F32, vv);
  const Twin g = h.input(rows, cols, DType::F32, 1.0);
  // The same gradient times 1024, as a loss-scaled backward leaves it.
  std::vector<double> scaled = Harness::host_values(g.cpu);
  for (double& x : scaled) x *= 1024.0;
  const Twin g_scaled = h.from_values(rows, cols, DType::F32, scaled);

  AdamWHyper hp;
  hp.lr = 1e-2f;
  hp.step = 4;
  cpu::adamw(p.cpu, g.cpu, m.cpu, v.cpu, hp);  // unscaled reference
  hp.grad_scale = 1024.0f;
  const Tokens flag_clear = h.tokens({0});
  hp.skip_flag = flag_clear.gpu;
  h.gpu().adamw(p.gpu, g_scaled.gpu, m.gpu, v.gpu, hp);
  h.expect_close(p, tolerance(DType::F32), "parameters after an unscaled step");
  h.expect_close(m, tolerance(DType::F32), "m after an unscaled step");
  h.expect_close(v, tolerance(DType::F32), "v after an unscaled step");

  // Flag set: nothing changes, bit for bit.
  const Tokens flag_set = h.tokens({1});
  hp.skip_flag = flag_set.gpu;
  const std::vector<double> p0 = h.device_values(p.gpu), m0 = h.device_values(m.gpu),
                            v0 = h.device_values(v.gpu);
  h.gpu().adamw(p.gpu, g_scaled.gpu, m.gpu, v.gpu, hp);
  EXPECT_EQ(h.device_values(p.gpu), p0) << "a skipped step changed the parameters";
  EXPECT_EQ(h.device_values(m.gpu), m0) << "a skipped step changed m";
  EXPECT_EQ(h.device_values(v.gpu), v0) << "a skipped step changed v";
}

class GpuFlagNonfinite : public GpuParamTest<DType> {};

TEST_P(GpuFlagNonfinite, FlagsInfAndNanOnly) {
  const DType t = GetParam();
  Harness h(t);
  const std::int64_t rows = 5, cols = 1001;
  std::vector<double> values(static_cast<std::size_t>(rows * cols));
  for (double& x : values) x = 100.0 * h.rng().normal();
  const auto read_flag = [&](const Tokens& f) {
    std::int32_t out = -1;
    h.gpu().download(&out, f.gpu, sizeof out);
    return out;
  };

  // Finite values, padding of NaN bytes after each row: the padding is not
  // part of the view and must not raise the flag.
  const Twin finite = h.from_values(rows, cols, t, values, 3);
  const Tokens f0 = h.tokens({0});
  h.gpu().flag_nonfinite(finite.gpu, const_cast<std::int32_t*>(f0.gpu));
  EXPECT_EQ(read_flag(f0), 0) << "finite values (NaN only in the row padding) raised the flag";

  for (const double bad :
       {static_cast<double>(INFINITY), -static_cast<double>(INFINITY), static_cast<double>(NAN)}) {
    std::vector<double> with_bad = values;
    with_bad[with_bad.size() - 2] = bad;  // near the end: the grid-stride tail
    const Twin x = h.from_values(rows, cols, t, with_bad, 3);
    const Tokens f = h.tokens({0});
    h.gpu().flag_nonfinite(x.gpu, const_cast<std::int32_t*>(f.gpu));
    EXPECT_EQ(read_flag(f), 1) << "missed " << bad;
  }

  // An already-set flag is never cleared.
  const Tokens f1 = h.tokens({1});
  h.gpu().flag_nonfinite(finite.gpu, const_cast<std::int32_t*>(f1.gpu));
  EXPECT_EQ(read_flag(f1), 1) << "a clean scan cleared the flag";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuFlagNonfinite, ::testing::ValuesIn(gpu_dtypes()),
                         [](const auto& info) { return dtype_label(info.param); });

}  // namespace
}  // namespace tinyllama::gpu_test
