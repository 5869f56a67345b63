// Every CPU reference op's backward against central finite differences of
// its forward, in fp64, on random inputs and awkward shapes. Each op's
// scalar loss is sum(out * R) with a fixed random R, so the analytic
// gradient is the op's backward applied to dout = R.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fd_check.h"
#include "ops/attention/cpu_attention.h"
#include "ops/elementwise/cpu_elementwise.h"
#include "ops/embedding/cpu_embedding.h"
#include "ops/linear/cpu_gemm.h"
#include "ops/loss/cpu_cross_entropy.h"
#include "ops/norm/cpu_rmsnorm.h"
#include "ops/optimizer/cpu_adamw.h"
#include "ops/rope/cpu_rope.h"
#include "ops/swiglu/cpu_swiglu.h"

namespace tinyllama::testing {
namespace {

constexpr double kTolerance = 1e-6;

struct GemmCase {
  bool trans_a, trans_b;
};

class GemmGradCheck : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmGradCheck, MatchesFiniteDifferences) {
  const auto [ta, tb] = GetParam();
  Rng rng(11);
  const std::int64_t m = 5, k = 7, n = 3;
  HostTensor a = ta ? random_tensor(k, m, rng) : random_tensor(m, k, rng);
  HostTensor b = tb ? random_tensor(n, k, rng) : random_tensor(k, n, rng);
  HostTensor c0 = random_tensor(m, n, rng);
  const HostTensor r = random_tensor(m, n, rng);
  const double alpha = 0.7, beta = 0.3;
  auto loss = [&] {
    HostTensor c = c0;
    cpu::gemm(c.mat(), a.mat(), ta, b.mat(), tb, alpha, beta);
    return dot(c.v, r.v);
  };
  // dA = alpha * R op(B)^T (transposed back when A is stored transposed), likewise dB.
  HostTensor dr = r;
  HostTensor da(a.rows, a.cols), db(b.rows, b.cols);
  if (ta) {
    cpu::gemm(da.mat(), b.mat(), tb, dr.mat(), true, alpha, 0);  // [k,m] = op(B) R^T
  } else {
    cpu::gemm(da.mat(), dr.mat(), false, b.mat(), !tb, alpha, 0);  // [m,k] = R op(B)^T
  }
  if (tb) {
    cpu::gemm(db.mat(), dr.mat(), true, a.mat(), ta, alpha, 0);  // [n,k] = R^T op(A)
  } else {
    cpu::gemm(db.mat(), a.mat(), !ta, dr.mat(), false, alpha, 0);  // [k,n] = op(A)^T R
  }
  EXPECT_LT(relative_error(da.v, numeric_gradient(a, loss)), kTolerance);
  EXPECT_LT(relative_error(db.v, numeric_gradient(b, loss)), kTolerance);
  // beta * c: the gradient with respect to c0 is beta * R.
  std::vector<double> dc(r.v);
  for (double& x : dc) x *= beta;
  EXPECT_LT(relative_error(dc, numeric_gradient(c0, loss)), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(AllTransposes, GemmGradCheck,
                         ::testing::Values(GemmCase{false, false}, GemmCase{true, false},
                                           GemmCase{false, true}, GemmCase{true, true}),
                         [](const auto& info) {
                           return std::string(info.param.trans_a ? "T" : "N") +
                                  (info.param.trans_b ? "T" : "N");
                         });

TEST(GemmReference, MatchesNaiveTripleLoopOnStridedViews) {
  Rng rng(5);
  HostTensor wide_a = random_tensor(9, 20, rng);
  HostTensor b = random_tensor(6, 13, rng);
  HostTensor c(9, 13);
  const Mat a = wide_a.mat().col_block(3, 6);  // [9,6] with ld 20
  cpu::gemm(c.mat(), a, false, b.mat(), false, 1.0, 0.0);
  for (std::int64_t i = 0; i < 9; ++i) {
    for (std::int64_t j = 0; j < 13; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < 6; ++p) s += wide_a.v[i * 20 + 3 + p] * b.v[p * 13 + j];
      EXPECT_NEAR(c.v[i * 13 + j], s, 1e-12);
    }
  }
}

TEST(RmsNormGradCheck, MatchesFiniteDifferences) {
  Rng rng(12);
  const std::int64_t rows = 4, d = 9;
  HostTensor x = random_tensor(rows, d, rng);
  HostTensor w = random_tensor(1, d, rng);
  const HostTensor r = random_tensor(rows, d, rng);
  auto loss = [&] {
    HostTensor out(rows, d), rstd(rows, 1);
    cpu::rmsnorm_forward(out.mat(), rstd.mat(), x.mat(), w.mat(), 1e-6);
    return dot(out.v, r.v);
  };
  HostTensor out(rows, d), rstd(rows, 1), dx(rows, d), dw(1, d);
  HostTensor dout = r;
  cpu::rmsnorm_forward(out.mat(), rstd.mat(), x.mat(), w.mat(), 1e-6);
  cpu::rmsnorm_backward(dx.mat(), dw.mat(), dout.mat(), x.mat(), w.mat(), rstd.mat());
  EXPECT_LT(relative_error(dx.v, numeric_gradient(x, loss)), kTolerance);
  EXPECT_LT(relative_error(dw.v, numeric_gradient(w, loss)), kTolerance);
}

TEST(RopeGradCheck, BackwardIsTheGradientOfForward) {
  Rng rng(13);
  const int seq = 7, hd = 6, heads = 3, batch = 2;
  HostTensor x = random_tensor(batch * seq, heads * hd, rng);
  const HostTensor r = random_tensor(batch * seq, heads * hd, rng);
  auto loss = [&] {
    HostTensor y = x;
    cpu::rope(y.mat(), seq, hd, 10000.0, +1);
    return dot(y.v, r.v);
  };
  HostTensor dx = r;
  cpu::rope(dx.mat(), seq, hd, 10000.0, -1);
  EXPECT_LT(relative_error(dx.v, numeric_gradient(x, loss)), kTolerance);
}

TEST(RopeReference, RotatesInterleavedPairsByPositionTimesFrequency) {
  Rng rng(14);
  const int seq = 5, hd = 4;
  HostTensor x = random_tensor(seq, hd, rng);
  HostTensor y = x;
  cpu::rope(y.mat(), seq, hd, 10000.0, +1);
  for (int p = 0; p < seq; ++p) {
    for (int i = 0; i < hd / 2; ++i) {
      const double angle = p * std::pow(10000.0, -2.0 * i / hd);
      const double a = x.v[p * hd + 2 * i], b = x.v[p * hd + 2 * i + 1];
      EXPECT_NEAR(y.v[p * hd + 2 * i], a * std::cos(angle) - b * std::sin(angle), 1e-12);
      EXPECT_NEAR(y.v[p * hd + 2 * i + 1], a * std::sin(angle) + b * std::cos(angle), 1e-12);
    }
  }
}

struct AttentionCase {
  int heads, kv_heads, head_dim, seq;
  bool keep_probs;
};

class AttentionGradCheck : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionGradCheck, MatchesFiniteDifferences) {
  const AttentionCase c = GetParam();
  const AttentionShape s{2, c.seq, c.heads, c.kv_heads, c.head_dim};
  const std::int64_t tokens = 2 * c.seq;
  Rng rng(15);
  HostTensor q = random_tensor(tokens, c.heads * c.head_dim, rng);
  HostTensor k = random_tensor(tokens, c.kv_heads * c.head_dim, rng);
  HostTensor v = random_tensor(tokens, c.kv_heads * c.head_dim, rng);
  const HostTensor r = random_tensor(tokens, c.heads * c.head_dim, rng);
  auto run_forward = [&](HostTensor& out, HostTensor& lse, HostTensor& probs) {
    cpu::attention_forward(out.mat(), lse.mat(), c.keep_probs ? probs.mat() : Mat(), q.mat(),
                           k.mat(), v.mat(), s);
  };
  HostTensor out(tokens, c.heads * c.head_dim), lse(2 * c.heads, c.seq);
  HostTensor probs(2 * c.heads * c.seq, c.seq);
  auto loss = [&] {
    HostTensor o = out, l = lse, p = probs;
    run_forward(o, l, p);
    return dot(o.v, r.v);
  };
  run_forward(out, lse, probs);
  HostTensor dq(q.rows, q.cols), dk(k.rows, k.cols), dv(v.rows, v.cols), dout = r;
  cpu::attention_backward(dq.mat(), dk.mat(), dv.mat(), dout.mat(), q.mat(), k.mat(), v.mat(),
                          lse.mat(), c.keep_probs ? probs.mat() : Mat(), s);
  // With one key the softmax is constant, so dK is exactly zero; otherwise it must not be.
  if (c.seq > 1) {
    EXPECT_TRUE(any_nonzero(dk.v));
  }
  EXPECT_LT(relative_error(dq.v, numeric_gradient(q, loss)), kTolerance);
  EXPECT_LT(relative_error(dk.v, numeric_gradient(k, loss)), kTolerance);
  EXPECT_LT(relative_error(dv.v, numeric_gradient(v, loss)), kTolerance);
}

INSTANTIATE_TEST_SUITE_P(
    GqaRatiosAndHeadDims, AttentionGradCheck,
    ::testing::Values(AttentionCase{2, 2, 4, 5, true},   // K = H
                      AttentionCase{4, 2, 6, 7, false},  // K = H/2, flash-style
                      AttentionCase{4, 1, 4, 3, true},   // K = 1 (MQA)
                      AttentionCase{4, 1, 2, 6, false}, AttentionCase{2, 1, 8, 1, true}));  // S = 1

TEST(AttentionReference, CausalRowsIgnoreTheFuture) {
  Rng rng(16);
  const AttentionShape s{1, 6, 2, 1, 4};
  HostTensor q = random_tensor(6, 8, rng), k = random_tensor(6, 4, rng),
             v = random_tensor(6, 4, rng);
  HostTensor out(6, 8), lse(2, 6), out2(6, 8), lse2(2, 6);
  cpu::attention_forward(out.mat(), lse.mat(), Mat(), q.mat(), k.mat(), v.mat(), s);
  for (int j = 3 * 4; j < 24; ++j) k.v[j] += 1.0, v.v[j] -= 2.0;  // change positions 3..5 only
  cpu::attention_forward(out2.mat(), lse2.mat(), Mat(), q.mat(), k.mat(), v.mat(), s);
  for (int i = 0; i < 3 * 8; ++i) EXPECT_EQ(out.v[i], out2.v[i]) << "row " << i / 8;
  EXPECT_NE(out.v[5 * 8], out2.v[5 * 8]);
}

TEST(SiluGradCheck, MatchesFiniteDifferences) {
  Rng rng(17);
  HostTensor x = random_tensor(3, 11, rng, 2.0);
  const HostTensor r = random_tensor(3, 11, rng);
  auto loss = [&] {
    HostTensor y(3, 11);
    cpu::silu_forward(y.mat(), x.mat());
    return dot(y.v, r.v);
  };
  HostTensor dx(3, 11), dout = r;
  cpu::silu_backward(dx.mat(), dout.mat(), x.mat());
  EXPECT_LT(relative_error(dx.v, numeric_gradient(x, loss)), kTolerance);
}

TEST(SwigluGradCheck, MatchesFiniteDifferencesAndComposition) {
  Rng rng(18);
  HostTensor gate = random_tensor(4, 9, rng, 2.0), up = random_tensor(4, 9, rng);
  const HostTensor r = random_tensor(4, 9, rng);
  auto loss = [&] {
    HostTensor y(4, 9);
    cpu::swiglu_forward(y.mat(), gate.mat(), up.mat());
    return dot(y.v, r.v);
  };
  HostTensor dgate(4, 9), dup(4, 9), dout = r;
  cpu::swiglu_backward(dgate.mat(), dup.mat(), dout.mat(), gate.mat(), up.mat());
  EXPECT_LT(relative_error(dgate.v, numeric_gradient(gate, loss)), kTolerance);
  EXPECT_LT(relative_error(dup.v, numeric_gradient(up, loss)), kTolerance);

  // The fused op is silu(gate) * up, exactly the unfused composition.
  HostTensor fused(4, 9), composed(4, 9);
  cpu::swiglu_forward(fused.mat(), gate.mat(), up.mat());
  cpu::silu_forward(composed.mat(), gate.mat());
  cpu::mul(composed.mat(), composed.mat(), up.mat());
  EXPECT_LT(relative_error(fused.v, composed.v), 1e-15);
}

TEST(CrossEntropyGradCheck, MatchesFiniteDifferences) {
  Rng rng(19);
  const std::int64_t rows = 5, vocab = 13;
  HostTensor logits = random_tensor(rows, vocab, rng, 3.0);
  const std::vector<std::int32_t> targets = {0, 12, 3, 3, 7};
  const double scale = 1.0 / rows;
  auto loss = [&] {
    HostTensor losses(rows, 1);
    cpu::cross_entropy_forward(losses.mat(), logits.mat(), targets.data());
    double s = 0;
    for (double l : losses.v) s += l;
    return s * scale;
  };
  HostTensor dlogits = logits;  // the op may run in place
  cpu::cross_entropy_backward(dlogits.mat(), dlogits.mat(), targets.data(), scale);
  EXPECT_LT(relative_error(dlogits.v, numeric_gradient(logits, loss)), kTolerance);
}

TEST(CrossEntropyReference, IsLogSumExpMinusTargetLogit) {
  Rng rng(20);
  HostTensor logits = random_tensor(2, 4, rng);
  const std::vector<std::int32_t> targets = {1, 3};
  HostTensor losses(2, 1);
  cpu::cross_entropy_forward(losses.mat(), logits.mat(), targets.data());
  for (int i = 0; i < 2; ++i) {
    double z = 0;
    for (int j = 0; j < 4; ++j) z += std::exp(logits.v[i * 4 + j]);
    EXPECT_NEAR(losses.v[i], std::log(z) - logits.v[i * 4 + targets[i]], 1e-12);
  }
}

TEST(EmbeddingGradCheck, MatchesFiniteDifferencesWithRepeatedTokens) {
  Rng rng(21);
  HostTensor table = random_tensor(6, 5, rng);
  const std::vector<std::int32_t> tokens = {2, 5, 2, 0, 2, 1, 5};
  const HostTensor r = random_tensor(7, 5, rng);
  auto loss = [&] {
    HostTensor out(7, 5);
    cpu::embedding_forward(out.mat(), tokens.data(), table.mat());
    return dot(out.v, r.v);
  };
  HostTensor dtable(6, 5), dout = r;
  cpu::embedding_backward(dtable.mat(), tokens.data(), dout.mat());
  EXPECT_LT(relative_error(dtable.v, numeric_gradient(table, loss)), kTolerance);

  // It accumulates into what is there (the tied LM head writes first).
  HostTensor twice = dtable;
  cpu::embedding_backward(twice.mat(), tokens.data(), dout.mat());
  for (std::size_t i = 0; i < twice.v.size(); ++i) EXPECT_DOUBLE_EQ(twice.v[i], 2 * dtable.v[i]);
}

TEST(AdamW, MatchesClosedFormOverSeveralSteps) {
  Rng rng(22);
  HostTensor p = random_tensor(3, 4, rng), m(3, 4), v(3, 4);
  std::vector<double> ref_p = p.v, ref_m(12, 0.0), ref_v(12, 0.0);
  AdamWHyper hp;
  hp.lr = 1e-2f;
  for (int step = 1; step <= 3; ++step) {
    HostTensor g = random_tensor(3, 4, rng);
    hp.step = step;
    cpu::adamw(p.mat(), g.mat(), m.mat(), v.mat(), hp);
    const double lr = hp.lr, b1 = hp.beta1, b2 = hp.beta2, eps = hp.eps, wd = hp.weight_decay;
    for (int i = 0; i < 12; ++i) {
      ref_p[i] *= 1 - lr * wd;
      ref_m[i] = b1 * ref_m[i] + (1 - b1) * g.v[i];
      ref_v[i] = b2 * ref_v[i] + (1 - b2) * g.v[i] * g.v[i];
      const double m_hat = ref_m[i] / (1 - std::pow(b1, step));
      const double v_hat = ref_v[i] / (1 - std::pow(b2, step));
      ref_p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
  EXPECT_LT(relative_error(p.v, ref_p), 1e-12);
  EXPECT_LT(relative_error(m.v, ref_m), 1e-12);
  EXPECT_LT(relative_error(v.v, ref_v), 1e-12);
}

TEST(CpuOps, RejectMismatchedShapesWithTheOpName) {
  Rng rng(23);
  HostTensor a = random_tensor(2, 3, rng), b = random_tensor(4, 5, rng), c(2, 5);
  try {
    cpu::gemm(c.mat(), a.mat(), false, b.mat(), false, 1, 0);
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("gemm"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tinyllama::testing
