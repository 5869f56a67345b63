// The rounded references the CUDA decoder's bfloat16 logits are held to
// (rounded_reference.h), checked on the CPU on the GPU test's own models and
// tokens: unrounded, the reference is the decoder; the device's rounding
// points meet DESIGN §2's bar (twice autocast's error against fp64 plus one
// bf16 ulp) by design, before any kernel runs, on each of the GPU test's
// runs and on further draws; and the GPU test's tight limit catches a query
// at the wrong position or a skipped residual by far.
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

// The GPU test's runs: a prefill of `prompt` tokens and 9 steps, the tokens
// drawn with seed 100 + prompt (gpu_decoder_test.cc, compare_steps).
constexpr int kPrompts[] = {1, 37, 150};
constexpr int kSteps = 9;

struct Case {
  ModelConfig cfg;
  std::vector<double> w;
  std::vector<std::int32_t> tokens;

  std::vector<double> logits(Rounding rounding, bool fp32_arithmetic = false,
                             Fault fault = Fault::None) const {
    return forward_logits(cfg, w, tokens, {rounding, fp32_arithmetic, fault});
  }
};

// The GPU test's weights (seed 11 + index) and `positions` tokens drawn
// with `token_seed`.
Case case_of(int index, int positions, std::uint64_t token_seed) {
  Case c{model_config(index), {}, {}};
  c.w = model_weights(ParamLayout(c.cfg), 11 + index);
  c.tokens = random_tokens(positions, c.cfg.vocab_size, token_seed);
  return c;
}

// The GPU test's run of model `index` with a prefill of `prompt`.
Case gpu_run(int index, int prompt) {
  return case_of(index, prompt + kSteps, 100 + static_cast<std::uint64_t>(prompt));
}

// Over a whole run's logits, as the GPU test measures.
double error(const std::vector<double>& got, const std::vector<double>& want) {
  return max_rel_error(got.data(), want.data(), static_cast<std::int64_t>(want.size()));
}

TEST(RoundedReference, UnroundedIsTheDecoderInFloat64) {
  for (int index = 0; index < kModels; ++index) {
    const Case c = case_of(index, 40, 250);
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
// stores meets it on each of that test's runs, and prints the figures. The
// short runs matter most: over 10 positions autocast's largest error is
// smaller, and a rounding point autocast does not have stands out (with the
// residual stream, its embedding rows and the norm weights in bf16 the
// device's points were 0.0733 from fp64 on model 1's prefill of 1 against a
// limit of 0.0613, as the GPU measured; over the 159 positions of a
// prefill of 150, 0.0715 against 0.1721).
TEST(RoundedReference, TheDeviceRoundingPointsMeetTheAutocastBar) {
  for (int index = 0; index < kModels; ++index) {
    for (int prompt : kPrompts) {
      const Case c = gpu_run(index, prompt);
      const std::vector<double> exact = c.logits(Rounding::None);
      const double device = error(c.logits(Rounding::Device), exact);
      const double autocast = error(c.logits(Rounding::Autocast), exact);
      EXPECT_LE(device, autocast_limit(autocast)) << "model " << index << ", prompt " << prompt;
      std::printf(
          "model %d, prefill of %3d: error against fp64: device's points %.4f, autocast's %.4f "
          "(limit %.4f)\n",
          index, prompt, device, autocast, autocast_limit(autocast));
    }
  }
}

// Not only on the GPU test's draws: over 30 further token rows of 10
// positions per model, the device's points stay within the bar, and on
// average no further from fp64 than autocast's (they round at a subset of
// autocast's points, but for the residual adds: autocast rounds the
// product, the device the sum). With the residual stream, its embedding
// rows and the norm weights in bf16, 7 of 160 such runs (40 draws per
// model, on three sets of weights) failed the bar, the device's error
// 1.27x autocast's on average and 3.87x at most; fp32 norm weights alone
// left 1 of 160 failing, an fp32 stream alone 7.
TEST(RoundedReference, TheDeviceRoundingPointsMeetTheAutocastBarOnFurtherDraws) {
  for (int index = 0; index < kModels; ++index) {
    double ratios = 0, worst = 0;
    constexpr int kDraws = 30;
    for (int draw = 0; draw < kDraws; ++draw) {
      const Case c = case_of(index, 10, 5000 + static_cast<std::uint64_t>(draw));
      const std::vector<double> exact = c.logits(Rounding::None);
      const double device = error(c.logits(Rounding::Device), exact);
      const double autocast = error(c.logits(Rounding::Autocast), exact);
      EXPECT_LE(device, autocast_limit(autocast)) << "model " << index << ", draw " << draw;
      ratios += device / autocast;
      worst = std::max(worst, device / autocast);
    }
    EXPECT_LE(ratios / kDraws, 1.1) << "model " << index;
    std::printf("model %d: device's error / autocast's over %d draws: mean %.2f, largest %.2f\n",
                index, kDraws, ratios / kDraws, worst);
  }
}

// The GPU test's tight limit, 2x fp32_drift (the largest over the float32
// summations) plus one ulp, is below what a query rotated at the wrong
// position or a skipped attention residual does to the logits, by 1.5x at
// least: the narrowest case, 1.7x, is the one-layer model's skipped
// residual (its attention output outweighs the residual it is added to);
// the others exceed the limit 20x and more.
TEST(RoundedReference, AWrongQueryPositionOrASkippedResidualFailsTheTightLimit) {
  for (int index = 0; index < kModels; ++index) {
    const Case c = gpu_run(index, 150);
    const std::vector<double> device = c.logits(Rounding::Device);
    const double drift = fp32_drift(c.cfg, c.w, c.tokens, device);
    EXPECT_GT(drift, 0.0) << "model " << index << ": fp32 arithmetic never moved a rounding";
    const double limit = autocast_limit(drift);
    for (Fault fault : {Fault::QueryPositionOffByOne, Fault::NoAttentionResidual}) {
      const double broken = error(c.logits(Rounding::Device, false, fault), device);
      EXPECT_GT(broken, 1.5 * limit) << "model " << index << ", fault " << static_cast<int>(fault);
      std::printf("model %d, fault %d: %.4f against the tight limit %.4f (fp32 drift %.5f)\n",
                  index, static_cast<int>(fault), broken, limit, drift);
    }
  }
}

// Each summation is float32 arithmetic at the device's points, so each
// stays within a few ulps of those points done exactly; the figures
// printed show how far apart they land on the same run.
TEST(RoundedReference, TheFloat32SummationOrdersSpreadAroundTheExactPoints) {
  for (int index = 0; index < kModels; ++index) {
    for (int prompt : kPrompts) {
      const Case c = gpu_run(index, prompt);
      const std::vector<double> device = c.logits(Rounding::Device);
      std::printf("model %d, prefill of %3d: fp32 drift by order:", index, prompt);
      for (Summation order : kSummations) {
        const std::vector<double> got =
            forward_logits(c.cfg, c.w, c.tokens, {Rounding::Device, true, Fault::None, order});
        const double e = error(got, device);
        EXPECT_LE(e, 4 * kBf16Ulp) << "model " << index << ", prompt " << prompt;
        std::printf(" %.4f", e);
      }
      std::printf("\n");
    }
  }
}

}  // namespace
}  // namespace tinyllama::reference
