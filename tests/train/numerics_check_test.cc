// `validate`'s measurement on the CPU: a correct backend passes every check
// with errors that are small but not zero (the comparison is really made), a
// backend with a small fault in one op fails the checks that op reaches, and
// the rounded baseline that sets the mixed-precision limits errs by about
// its dtype's resolution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/rng.h"
#include "cpu/cpu_backend.h"
#include "cpu/rounding_backend.h"
#include "model/init.h"
#include "model/model.h"
#include "model/tolerance.h"
#include "train/numerics_check.h"
#include "train/numerics_report.h"

namespace tinyllama {
namespace {

NumericsCase cpu_case(const std::string& config, const std::string& level) {
  for (const NumericsConfig& c : validation_configs()) {
    if (c.name == config) return {c, level, DeviceKind::Cpu, Precision::fp32()};
  }
  throw std::logic_error("no config " + config);
}

TEST(NumericsCheck, ConfigsCoverMhaGqaAndMqa) {
  const std::vector<NumericsConfig> configs = validation_configs();
  ASSERT_EQ(configs.size(), 3u);
  const int heads = configs[0].model.num_heads;
  EXPECT_EQ(configs[0].model.num_kv_heads, heads);
  EXPECT_EQ(configs[1].model.num_kv_heads, heads / 2);
  EXPECT_EQ(configs[2].model.num_kv_heads, 1);
  EXPECT_EQ(validation_cases({"v1", "v2"}, true, false).size(), 6u);
  EXPECT_EQ(validation_cases({"v1"}, true, true).size(), 12u);  // cpu fp32; cuda fp32 bf16 fp16
}

TEST(NumericsCheck, EveryCpuLevelPassesWithMeasuredErrors) {
  for (const std::string& level : implemented_levels()) {
    const NumericsResult r = check_numerics(cpu_case("gqa", level));
    EXPECT_TRUE(r.pass()) << level;
    const ErrorCheck* loss = r.worst("loss");
    const ErrorCheck* grad = r.worst("grad");
    ASSERT_NE(loss, nullptr);
    ASSERT_NE(grad, nullptr);
    ASSERT_NE(r.worst("adamw"), nullptr);
    // float32 against float64 cannot agree exactly: a zero would mean the
    // two sides were the same computation.
    EXPECT_GT(loss->error, 0.0) << level;
    EXPECT_GT(grad->error, 0.0) << level;
    EXPECT_EQ(grad->limit, kFp32Tolerance);
    // Both steps, every tensor kind.
    int steps_seen[3] = {0, 0, 0};
    for (const ErrorCheck& e : r.checks) steps_seen[e.step] += 1;
    EXPECT_EQ(steps_seen[1], steps_seen[2]);
    EXPECT_GE(steps_seen[1], 2 + 7);  // loss, adamw, 7 tensor kinds
  }
}

// silu's output 1e-4 too large: every gradient the FFNs reach moves by
// about that much (the loss hardly: at init the FFNs add little to it).
class SkewedSilu : public CpuBackend {
 public:
  SkewedSilu() : CpuBackend(CpuKernels::Fast) {}
  void silu_forward(Mat out, Mat x) override {
    CpuBackend::silu_forward(out, x);
    scale(out);
  }
  void swiglu_forward(Mat out, Mat gate, Mat up) override {
    CpuBackend::swiglu_forward(out, gate, up);
    scale(out);
  }

 private:
  static void scale(Mat m) {
    for (std::int64_t r = 0; r < m.rows; ++r) {
      for (std::int64_t c = 0; c < m.cols; ++c) m.ptr<float>()[r * m.ld + c] *= 1.0001f;
    }
  }
};

TEST(NumericsCheck, AFaultyOpFailsTheGradients) {
  SkewedSilu backend;
  const NumericsResult r = check_numerics(cpu_case("mqa", "v2"), backend);
  EXPECT_FALSE(r.pass());
  EXPECT_FALSE(r.worst("grad")->pass()) << r.worst("grad")->error;
  EXPECT_NE(validation_row(r).find("FAIL"), std::string::npos);
}

// AdamW without its weight decay: only the update check can see it.
class NoWeightDecay : public CpuBackend {
 public:
  NoWeightDecay() : CpuBackend(CpuKernels::Fast) {}
  void adamw(Mat param, Mat grad, Mat m, Mat v, const AdamWHyper& hp) override {
    AdamWHyper no_decay = hp;
    no_decay.weight_decay = 0.0f;
    CpuBackend::adamw(param, grad, m, v, no_decay);
  }
};

TEST(NumericsCheck, AMissingWeightDecayFailsOnlyTheUpdate) {
  NoWeightDecay backend;
  const NumericsResult r = check_numerics(cpu_case("mha", "v1"), backend);
  EXPECT_TRUE(r.worst("loss")->pass());
  EXPECT_TRUE(r.worst("grad")->pass());
  EXPECT_FALSE(r.worst("adamw")->pass()) << r.worst("adamw")->error;
  EXPECT_FALSE(r.pass());
}

// Round to nearest: each element within half an ulp of the dtype, relative.
TEST(RoundingBackend, RoundsToNearestWithinHalfAnUlp) {
  for (const DType t : {DType::BF16, DType::F16}) {
    std::vector<double> w(1000);
    Rng rng(3);
    for (double& x : w) x = rng.normal();
    std::vector<double> r = w;
    round_to_dtype(r, t);
    double worst = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (std::abs(w[i]) < 1e-4) continue;  // fp16 subnormals hold fewer bits
      worst = std::max(worst, std::abs(r[i] - w[i]) / std::abs(w[i]));
    }
    EXPECT_GT(worst, 0.0);
    EXPECT_LE(worst, compute_ulp(t) / 2);
  }
}

// The rounded reference, the baseline of the mixed-precision limits, loses
// what storing values in the dtype costs: something, and more for bfloat16
// (8 significant bits) than for float16 (11).
TEST(RoundingBackend, ItsErrorGrowsWithTheDtypesResolution) {
  const NumericsConfig cfg = validation_configs()[1];
  const StepPlan plan =
      plan_for_level("v2", Precision::fp64(), DeviceCaps::cpu(), cfg.model, cfg.shape);
  auto run = [&](Backend& backend, bool round_weights, DType t) {
    Model model(cfg.model, cfg.shape, plan, backend);
    std::vector<double> w = initial_weights(model.layout(), 5);
    if (round_weights) round_to_dtype(w, t);
    model.set_params(w);
    std::vector<std::int32_t> rows(static_cast<std::size_t>(cfg.shape.batch) * (cfg.shape.seq + 1));
    Rng rng(6);
    for (auto& x : rows) x = static_cast<std::int32_t>(1 + rng.below(100));
    model.set_batch(rows);
    model.forward();
    const double loss = model.loss();
    model.backward();
    return std::make_pair(loss, model.grads());
  };
  CpuBackend exact;
  const auto ref = run(exact, false, DType::F64);
  double loss_error[2], grad_error[2];
  int i = 0;
  for (const DType t : {DType::BF16, DType::F16}) {
    RoundingBackend rounding(t);
    const auto got = run(rounding, true, t);
    loss_error[i] = std::abs(got.first - ref.first) / ref.first;
    grad_error[i] = max_rel_error(got.second.data(), ref.second.data(), ref.second.size());
    EXPECT_GT(loss_error[i], 0.0);
    EXPECT_GT(grad_error[i], 0.0);
    ++i;
  }
  EXPECT_GT(loss_error[0], loss_error[1]);
  EXPECT_GT(grad_error[0], grad_error[1]);
}

}  // namespace
}  // namespace tinyllama
