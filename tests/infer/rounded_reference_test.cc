// The rounded references the CUDA decoder's bfloat16 logits are held to
// (rounded_reference.h), checked on the CPU on the GPU test's own models and
// tokens: unrounded, the reference is the decoder; the device's rounding
// points meet DESIGN §2's bar (twice autocast's error against fp64 plus one
// bf16 ulp) by design, before any kernel runs; and the GPU test's tight
// limit catches a query at the wrong position or a skipped residual by far.
#include "infer/rounded_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "infer/decode_test_models.h"
#include "infer/decoder.h"

namespace tinyllama::reference {
namespace {

using decode_test::kModels;
using decode_test::model_config;
using decode_test::model_weights;
using decode_test::random_tokens;

// The GPU test's longest run: a prefill of 150 and 9 steps.
constexpr int kPositions = 159;

struct Case {
  ModelConfig cfg;
  std::vector<double> w;
  std::vector<std::int32_t> tokens;

  std::vector<double> logits(Rounding rounding, bool fp32_arithmetic = false,
                             Fault fault = Fault::None) const {
    return forward_logits(cfg, w, tokens, {rounding, fp32_arithmetic, fault});
  }
};

// The GPU test's weights (seed 11 + index) and, for kPositions, the tokens
// of its prefill of 150 (seed 100 + 150).
Case case_of(int index, int positions) {
  Case c{model_config(index), {}, {}};
  c.w = model_weights(ParamLayout(c.cfg), 11 + index);
  c.tokens = random_tokens(positions, c.cfg.vocab_size, 250);
  return c;
}

// Over a whole run's logits, as the GPU test measures.
double error(const std::vector<double>& got, const std::vector<double>& want) {
  return max_rel_error(got.data(), want.data(), static_cast<std::int64_t>(want.size()));
}

TEST(RoundedReference, UnroundedIsTheDecoderInFloat64) {
  for (int index = 0; index < kModels; ++index) {
    const Case c = case_of(index, 40);
    Decoder decoder(c.cfg, c.w, 40, DType::F64);
    const std::vector<double> want = decoder.step(c.tokens, true);
    const std::vector<double> got = c.logits(Rounding::None);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LE(error(got, want), 1e-12) << "model " << index;
  }
}

// DESIGN §2 for the device's rounding points: over a run, the error against
// fp64 at most twice autocast's plus one ulp. The GPU test holds the device
// to the same limit; this shows that a device rounding exactly where it
// stores meets it on these models, and prints the figures.
TEST(RoundedReference, TheDeviceRoundingPointsMeetTheAutocastBar) {
  for (int index = 0; index < kModels; ++index) {
    const Case c = case_of(index, kPositions);
    const std::vector<double> exact = c.logits(Rounding::None);
    const double device = error(c.logits(Rounding::Device), exact);
    const double autocast = error(c.logits(Rounding::Autocast), exact);
    EXPECT_LE(device, autocast_limit(autocast)) << "model " << index;
    std::printf(
        "model %d: error against fp64: device's points %.4f, autocast's %.4f (limit %.4f)\n", index,
        device, autocast, autocast_limit(autocast));
  }
}

// The GPU test's tight limit, 2x what fp32 arithmetic at the device's
// points is off by plus one ulp, is far below what a query rotated at the wrong
// position or a skipped attention residual does to the logits (at least
// twice the limit; the narrowest case, 2.4x, is the one-layer model whose
// attention output outweighs the residual it is added to).
TEST(RoundedReference, AWrongQueryPositionOrASkippedResidualFailsTheTightLimit) {
  for (int index = 0; index < kModels; ++index) {
    const Case c = case_of(index, kPositions);
    const std::vector<double> device = c.logits(Rounding::Device);
    const double fp32 = error(c.logits(Rounding::Device, true), device);
    EXPECT_GT(fp32, 0.0) << "model " << index << ": fp32 arithmetic never moved a rounding";
    const double limit = autocast_limit(fp32);
    for (Fault fault : {Fault::QueryPositionOffByOne, Fault::NoAttentionResidual}) {
      const double broken = error(c.logits(Rounding::Device, false, fault), device);
      EXPECT_GT(broken, 2 * limit) << "model " << index << ", fault " << static_cast<int>(fault);
      std::printf("model %d, fault %d: %.4f against the tight limit %.4f (fp32 arithmetic %.5f)\n",
                  index, static_cast<int>(fault), broken, limit, fp32);
    }
  }
}

}  // namespace
}  // namespace tinyllama::reference
