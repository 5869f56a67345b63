// The training step's FP8 path (model_fp8.cc) on the CPU, where the FP8
// GEMMs are emulated in float64 (CpuBackend's quantize_fp8 and gemm_fp8):
// every linear GEMM in FP8 gives finite gradients near the exact step's,
// the same step whether the residual add is the GEMM's (v4, a copy then an
// accumulating FP8 GEMM) or a separate op (v2), and the same bits twice.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "fp8_test_config.h"
#include "model/fp8_plan.h"
#include "model/init.h"
#include "model/model.h"
#include "model/test_plans.h"
#include "random_batch.h"

namespace tinyllama {
namespace {

constexpr BatchShape kShape{2, 16};  // the token count a multiple of 16 too

struct Step {
  double loss = 0;
  std::vector<double> grads;
};

Step run(const std::string& level, bool fp8) {
  const ModelConfig cfg = fp8_test_config();
  CpuBackend cpu;
  StepPlan plan = test_plan(level, Precision::fp64(), cpu, cfg, kShape);
  if (fp8) {
    plan.fp8 = choose_fp8_linears(cfg, kShape, Fp8Choice::All);
    if (plan.ops.swiglu == SwigluImpl::Gemm) plan.ops.swiglu = SwigluImpl::Fused;
  }
  Model m(cfg, kShape, plan, cpu);
  m.set_params(initial_weights(m.layout(), 21));
  m.set_batch(random_rows(kShape.batch, kShape.seq, cfg.vocab_size, 22));
  m.forward();
  Step s{m.loss(), {}};
  m.backward(1.0f, false);
  s.grads = m.grads();
  return s;
}

// Per weight matrix (norm weights aside), ||a - b|| / ||b||: the worst.
double worst_matrix_error(const std::vector<double>& a, const std::vector<double>& b) {
  CpuBackend cpu;
  const ModelConfig cfg = fp8_test_config();
  const Model m(cfg, kShape, test_plan("v2", Precision::fp64(), cpu, cfg, kShape), cpu);
  double worst = 0;
  for (const ParamSlot& s : m.layout().slots()) {
    if (s.is_norm) continue;
    double d2 = 0, b2 = 0;
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      const auto k = static_cast<std::size_t>(s.offset + i);
      d2 += (a[k] - b[k]) * (a[k] - b[k]);
      b2 += b[k] * b[k];
    }
    worst = std::max(worst, std::sqrt(d2 / b2));
  }
  return worst;
}

TEST(Fp8Step, GradientsStayNearTheExactStepsAndDifferFromThem) {
  const Step exact = run("v2", false);
  const Step fp8 = run("v2", true);
  ASSERT_TRUE(std::isfinite(fp8.loss));
  const double err = worst_matrix_error(fp8.grads, exact.grads);
  // E5M2 rounds a gradient by at most 2^-3 of itself, E4M3 an activation
  // or weight by 2^-4: about 0.07 and 0.04 as rms relative errors, and a
  // weight gradient's path holds a few of them (H200, the D256 model: 0.09
  // to 0.14). A transposed copy read as the direct one gives an unrelated
  // gradient, about sqrt(2) away.
  EXPECT_LT(err, 0.3);
  EXPECT_GT(err, 1e-3);  // the GEMMs did quantise
  EXPECT_NEAR(fp8.loss, exact.loss, 0.05 * exact.loss);
}

TEST(Fp8Step, TheResidualAddInTheGemmIsTheSameStep) {
  const Step v2 = run("v2", true);
  const Step v4 = run("v4", true);
  EXPECT_NEAR(v4.loss, v2.loss, 1e-12 * v2.loss);
  EXPECT_LT(worst_matrix_error(v4.grads, v2.grads), 1e-9);
}

TEST(Fp8Step, RunsToTheSameBitsTwice) {
  const Step a = run("v4", true);
  const Step b = run("v4", true);
  EXPECT_EQ(a.loss, b.loss);
  EXPECT_EQ(a.grads, b.grads);
}

// The CPU backend, but a SwiGLU or norm that writes FP8 codes leaves its
// bf16 result NaN where the caller said it need not be kept (the contract lets
// it leave the buffer as it was): a model that reads it anyway then steps
// to NaN.
class ScratchPoisoningCpu : public CpuBackend {
 public:
  void swiglu_forward_fp8(Mat hidden, Mat gate, Mat up, const Fp8Tensor& q, Fp8ScaleFrom from,
                          bool keep_hidden) override {
    std::vector<double> scratch;
    hidden = with_scratch(hidden, keep_hidden, scratch, shape_only_outputs);
    CpuBackend::swiglu_forward_fp8(hidden, gate, up, q, from, keep_hidden);
    if (!keep_hidden) poison(hidden);
    ++fused_calls;
  }
  void rmsnorm_forward_fp8(Mat out, Mat rstd, Mat x, Mat weight, double eps, const Fp8Tensor& q,
                           Fp8ScaleFrom from, bool keep_out) override {
    CpuBackend::rmsnorm_forward_fp8(out, rstd, x, weight, eps, q, from, keep_out);
    if (!keep_out) poison(out);
    ++fused_calls;
  }
  void rmsnorm_apply_fp8(Mat out, Mat x, Mat weight, Mat rstd, const Fp8Tensor& q,
                         Fp8ScaleFrom from, bool keep_out) override {
    CpuBackend::rmsnorm_apply_fp8(out, x, weight, rstd, q, from, keep_out);
    if (!keep_out) poison(out);
    ++fused_calls;
  }
  void swiglu_backward_fp8(Mat d_gate_up, Mat dout, Mat gate, Mat up, const Fp8Tensor& q,
                           Fp8ScaleFrom from, bool keep_grads) override {
    std::vector<double> scratch;
    d_gate_up = with_scratch(d_gate_up, keep_grads, scratch, shape_only_grads);
    CpuBackend::swiglu_backward_fp8(d_gate_up, dout, gate, up, q, from, keep_grads);
    if (!keep_grads) poison(d_gate_up);
    ++fused_calls;
  }
  int shape_only_grads = 0;
  int shape_only_outputs = 0;
  int fused_calls = 0;

 private:
  // A result with no memory (Fp8Linears::swiglu_keeps_codes,
  // swiglu_grad_codes_only) is computed into scratch of the test's own,
  // then forgotten.
  static Mat with_scratch(Mat m, bool keep, std::vector<double>& scratch, int& shape_only) {
    if (!m.empty()) return m;
    EXPECT_FALSE(keep) << "a result with no memory cannot be kept";
    scratch.resize(static_cast<std::size_t>(m.numel()));
    ++shape_only;
    return Mat(scratch.data(), m.dtype, m.rows, m.cols);
  }
  static void poison(Mat m) {
    ASSERT_EQ(m.dtype, DType::F64);
    for (std::int64_t r = 0; r < m.rows; ++r) {
      for (std::int64_t c = 0; c < m.cols; ++c) m.ptr<double>()[r * m.ld + c] = std::nan("");
    }
  }
};

// Delayed scaling (--fp8-scaling delayed) over a few whole steps: the
// model with every linear GEMM in FP8, its steps forward, backward and
// AdamW's update on one batch each; with the SwiGLU and the recomputed
// norms writing their codes (Fp8Linears::swiglu_casts, norm_casts) or not,
// the activations stored or recomputed.
class DelayedRun {
 public:
  explicit DelayedRun(Fp8Scaling scaling, bool producer_casts = false,
                      ActivationsImpl activations = ActivationsImpl::Stored,
                      bool grad_codes_only = false, bool output_codes_only = false)
      : plan_(test_plan("v4", Precision::fp64(), cpu_, fp8_test_config(), kShape)) {
    plan_.fp8 = choose_fp8_linears(fp8_test_config(), kShape, Fp8Choice::All, scaling,
                                   Fp8Producers{producer_casts});
    plan_.fp8.norm_casts = producer_casts && scaling == Fp8Scaling::Delayed;
    plan_.fp8.swiglu_grad_codes_only = grad_codes_only;
    plan_.fp8.swiglu_keeps_codes = output_codes_only;
    if (plan_.ops.swiglu == SwigluImpl::Gemm) plan_.ops.swiglu = SwigluImpl::Fused;
    plan_.ops.activations = activations;
    model_ = std::make_unique<Model>(fp8_test_config(), kShape, plan_, cpu_);
    model_->set_params(initial_weights(model_->layout(), 21));
  }
  Model& model() { return *model_; }
  const StepPlan& plan() const { return plan_; }
  int fused_swiglu_calls() const { return cpu_.fused_calls; }
  int shape_only_grads() const { return cpu_.shape_only_grads; }
  int shape_only_outputs() const { return cpu_.shape_only_outputs; }
  // Step `n` (1-based): its batch, forward and backward; the update unless
  // `update` is false. Returns the loss and gradients.
  Step step(int n, bool update = true) {
    model_->set_batch(random_rows(kShape.batch, kShape.seq, fp8_test_config().vocab_size, 40 + n));
    model_->forward();
    Step s{model_->loss(), {}};
    model_->backward(1.0f, false);
    s.grads = model_->grads();
    if (update) {
      AdamWHyper hp;
      hp.lr = 1e-2f;
      hp.step = n;
      model_->optimizer_step(hp);
    }
    return s;
  }

 private:
  ScratchPoisoningCpu cpu_;
  StepPlan plan_;
  std::unique_ptr<Model> model_;
};

TEST(Fp8Step, DelayedScalingStartsAsCurrentThenScalesFromTheHistory) {
  DelayedRun current(Fp8Scaling::Current), delayed(Fp8Scaling::Delayed);
  EXPECT_TRUE(current.model().fp8_scaling_state().empty());
  const Step c1 = current.step(1), d1 = delayed.step(1);
  EXPECT_EQ(d1.loss, c1.loss) << "the first step has no history: current scaling";
  EXPECT_EQ(d1.grads, c1.grads);
  // Step 2 starts from the same weights; only the scales differ.
  const Step c2 = current.step(2), d2 = delayed.step(2);
  const double err = worst_matrix_error(d2.grads, c2.grads);
  EXPECT_GT(err, 0.0) << "delayed scaling's step 2 used step 1's amaxes";
  EXPECT_LT(err, 0.3) << "both are FP8 steps of the same weights (Fp8Step's first test's bound)";
  // Every block's newest history entry is a real amax or zero (a tensor
  // not quantised), never left undefined.
  const std::vector<float> state = delayed.model().fp8_scaling_state();
  ASSERT_FALSE(state.empty());
  int recorded = 0;
  for (std::size_t b = 0; b < state.size(); b += kFp8Block) {
    ASSERT_TRUE(std::isfinite(state[b + kFp8HistoryAt]));
    recorded += state[b + kFp8HistoryAt] > 0;
  }
  EXPECT_EQ(recorded, static_cast<int>(state.size() / kFp8Block))
      << "with every linear in FP8, every block records an amax each step";
}

TEST(Fp8Step, EvaluationLeavesTheDelayedScalingStateAsItWas) {
  DelayedRun run(Fp8Scaling::Delayed);
  run.step(1);
  run.step(2);
  const std::vector<float> before = run.model().fp8_scaling_state();
  run.model().set_batch(random_rows(kShape.batch, kShape.seq, fp8_test_config().vocab_size, 99));
  run.model().evaluate();
  EXPECT_TRUE(std::isfinite(run.model().loss()));
  EXPECT_EQ(run.model().fp8_scaling_state(), before);
  run.model().forward();  // a training forward records (and first updates the scales)
  EXPECT_NE(run.model().fp8_scaling_state(), before);
}

TEST(Fp8Step, DelayedScalingStateRestoredGivesTheSameStep) {
  DelayedRun a(Fp8Scaling::Delayed);
  a.step(1);
  a.step(2);
  std::vector<std::vector<std::uint8_t>> blocks;
  for (const auto b :
       {Model::StateBlock::Params, Model::StateBlock::AdamM, Model::StateBlock::AdamV}) {
    blocks.push_back(a.model().state_bytes(b));
  }
  const std::vector<float> fp8_state = a.model().fp8_scaling_state();
  const Step a3 = a.step(3, false);

  DelayedRun b(Fp8Scaling::Delayed);
  b.model().set_state_bytes(Model::StateBlock::Params, blocks[0]);
  b.model().set_state_bytes(Model::StateBlock::AdamM, blocks[1]);
  b.model().set_state_bytes(Model::StateBlock::AdamV, blocks[2]);
  b.model().set_fp8_scaling_state(fp8_state);
  const Step b3 = b.step(3, false);
  EXPECT_EQ(b3.loss, a3.loss);
  EXPECT_EQ(b3.grads, a3.grads);

  // Without the history the same weights step differently (as current scaling).
  DelayedRun c(Fp8Scaling::Delayed);
  c.model().set_state_bytes(Model::StateBlock::Params, blocks[0]);
  EXPECT_NE(c.step(3, false).grads, a3.grads);
  EXPECT_THROW(c.model().set_fp8_scaling_state(std::vector<float>(3)), std::invalid_argument);
}

// The SwiGLU and the recomputed norms writing the FP8 codes of their
// results change where the codes come from, not what they are: the same
// steps, bit for bit, with the activations stored for the backward or
// recomputed there -- and with
// every bf16 result the model said it need not keep poisoned, so a read of
// one would show. Delayed scaling's first step scales as current scaling
// does; the steps after it take the held scales the fused kernels need.
TEST(Fp8Step, TheSwigluWritingItsCodesGivesTheSameSteps) {
  for (const ActivationsImpl a : {ActivationsImpl::Stored, ActivationsImpl::RecomputeNormsSwiglu}) {
    SCOPED_TRACE(a == ActivationsImpl::Stored ? "stored" : "recomputed");
    DelayedRun plain(Fp8Scaling::Delayed, false, a), fused(Fp8Scaling::Delayed, true, a);
    ASSERT_FALSE(plain.plan().fp8.swiglu_casts);
    ASSERT_TRUE(fused.plan().fp8.swiglu_casts);
    ASSERT_TRUE(fused.plan().fp8.norm_casts);
    ASSERT_EQ(fused.plan().ops.epilogue, GemmEpilogue::Residual) << "v4: the norms are their own";
    for (int n = 1; n <= 3; ++n) {
      const Step p = plain.step(n), f = fused.step(n);
      ASSERT_TRUE(std::isfinite(f.loss));
      EXPECT_EQ(f.loss, p.loss) << "step " << n;
      EXPECT_EQ(f.grads, p.grads) << "step " << n;
    }
    EXPECT_EQ(fused.model().fp8_scaling_state(), plain.model().fp8_scaling_state());
    // Per step and layer: the SwiGLU's forward and backward and the two
    // forward norms; recomputed, the SwiGLU's and the two norms' recompute.
    const int per_step = fp8_test_config().num_layers * (a == ActivationsImpl::Stored ? 4 : 7);
    EXPECT_EQ(fused.fused_swiglu_calls(), 3 * per_step);
  }
}

// The gate/up gradient kept only as its FP8 codes
// (Fp8Linears::swiglu_grad_codes_only): the arena has no bf16 buffer for
// it, the SwiGLU backward gets its shape with no memory, and nothing else
// reads it -- the same steps, bit for bit, the first (scaled afresh)
// included.
TEST(Fp8Step, TheGateUpGradientAsCodesOnlyGivesTheSameSteps) {
  DelayedRun plain(Fp8Scaling::Delayed, true),
      codes(Fp8Scaling::Delayed, true, ActivationsImpl::Stored, true);
  const ActivationPlan with(fp8_test_config(), kShape, plain.plan());
  const ActivationPlan without(fp8_test_config(), kShape, codes.plan());
  ASSERT_FALSE(without.d_gate_up.used());
  EXPECT_EQ(with.bytes - without.bytes, kShape.tokens() * 2 * fp8_test_config().ffn_dim * 8)
      << "one [tokens, 2F] buffer of the compute dtype (fp64 here) less";
  for (int n = 1; n <= 3; ++n) {
    const Step p = plain.step(n), c = codes.step(n);
    ASSERT_TRUE(std::isfinite(c.loss));
    EXPECT_EQ(c.loss, p.loss) << "step " << n;
    EXPECT_EQ(c.grads, p.grads) << "step " << n;
  }
  EXPECT_EQ(codes.shape_only_grads(), 3 * fp8_test_config().num_layers);
}

// The SwiGLU output kept only as the down projection's transposed codes
// (Fp8Linears::swiglu_keeps_codes): the forward's SwiGLU writes them with
// the forward's copy and scale, the arena has no bf16 output, and the
// backward casts nothing for that weight gradient -- the same steps, bit
// for bit, the first (scaled afresh) included.
TEST(Fp8Step, TheSwigluOutputAsCodesOnlyGivesTheSameSteps) {
  DelayedRun plain(Fp8Scaling::Delayed, true),
      codes(Fp8Scaling::Delayed, true, ActivationsImpl::Stored, false, true);
  const ActivationPlan with(fp8_test_config(), kShape, plain.plan());
  const ActivationPlan without(fp8_test_config(), kShape, codes.plan());
  const int layers = fp8_test_config().num_layers;
  ASSERT_FALSE(without.layers[0].ffn_hidden.used());
  ASSERT_EQ(static_cast<int>(without.fp8.down_x_t.size()), layers);
  ASSERT_FALSE(without.fp8.x_t[static_cast<int>(LinearKind::Down)].used());
  const std::int64_t elems = kShape.tokens() * fp8_test_config().ffn_dim;
  const std::int64_t code_bytes = without.fp8.down_x_t[0].bytes;
  EXPECT_EQ(code_bytes, elems);
  EXPECT_EQ(with.bytes - without.bytes, layers * elems * 8 - (layers - 1) * code_bytes)
      << "a layer's [tokens, F] output of the compute dtype (fp64 here) for its codes, the "
         "shared transposed copy for the first layer's";
  for (int n = 1; n <= 3; ++n) {
    const Step p = plain.step(n), c = codes.step(n);
    ASSERT_TRUE(std::isfinite(c.loss));
    EXPECT_EQ(c.loss, p.loss) << "step " << n;
    EXPECT_EQ(c.grads, p.grads) << "step " << n;
  }
  EXPECT_EQ(codes.shape_only_outputs(), 3 * layers);
  EXPECT_EQ(codes.model().fp8_scaling_state(), plain.model().fp8_scaling_state());
}

// Current scaling has no scale before the pass: the plan leaves the casts
// to the casts.
TEST(Fp8Step, CurrentScalingKeepsTheSwigluPlain) {
  DelayedRun current(Fp8Scaling::Current, true);
  EXPECT_FALSE(current.plan().fp8.swiglu_casts);
  current.step(1);
  EXPECT_EQ(current.fused_swiglu_calls(), 0);
}

}  // namespace
}  // namespace tinyllama
