// The KV-cache decoder (src/infer) against the training model: a prefill of
// a row gives the training forward pass's loss (fp64, to rounding), token
// by token decoding with the cache gives the prefill's logits, fp32
// against fp64; and the sampler's greedy, top-k, top-p and seeded draws.
#include "infer/decoder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/errors.h"
#include "core/rng.h"
#include "infer/decode_test_models.h"
#include "infer/sampler.h"
#include "infer/text_codec.h"
#include "model/init.h"
#include "model/model.h"
#include "model/test_plans.h"

namespace tinyllama {
namespace {

using decode_test::random_tokens;

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 53;
  c.hidden_dim = 48;
  c.num_layers = 2;
  c.num_heads = 6;
  c.num_kv_heads = 2;
  c.ffn_dim = 40;
  return c;
}

// Larger than init's N(0, 0.02), so attention and RoPE visibly matter.
std::vector<double> weights(const ParamLayout& layout) {
  std::vector<double> w = initial_weights(layout, 21);
  Rng rng(5);
  for (const ParamSlot& s : layout.slots()) {
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      w[s.offset + i] += s.is_norm ? 0.2 * rng.normal() : 0.15 * rng.normal();
    }
  }
  return w;
}

double mean_cross_entropy(const std::vector<double>& logits, const std::vector<std::int32_t>& row,
                          int vocab) {
  double sum = 0;
  const std::size_t n = row.size() - 1;
  for (std::size_t t = 0; t < n; ++t) {
    const double* l = logits.data() + t * vocab;
    const double m = *std::max_element(l, l + vocab);
    double z = 0;
    for (int v = 0; v < vocab; ++v) z += std::exp(l[v] - m);
    sum += m + std::log(z) - l[row[t + 1]];
  }
  return sum / static_cast<double>(n);
}

TEST(Decoder, PrefillComputesTheTrainingModelsLoss) {
  const ModelConfig cfg = small_config();
  const BatchShape shape{1, 23};
  const ParamLayout layout(cfg);
  const std::vector<double> w = weights(layout);
  const std::vector<std::int32_t> row = random_tokens(shape.seq + 1, cfg.vocab_size, 3);

  CpuBackend backend;
  Model model(cfg, shape, test_plan("v2", Precision::fp64(), backend, cfg, shape), backend);
  model.set_params(w);
  model.set_batch(row);
  model.forward();
  const double want = model.loss();

  Decoder decoder(cfg, w, shape.seq, DType::F64);
  const std::vector<std::int32_t> inputs(row.begin(), row.end() - 1);
  const double got = mean_cross_entropy(decoder.step(inputs, true), row, cfg.vocab_size);
  EXPECT_GT(want, 1.0);
  EXPECT_NEAR(got, want, 1e-12 * want);
}

TEST(Decoder, TokenByTokenWithTheCacheEqualsThePrefill) {
  const ModelConfig cfg = small_config();
  const ParamLayout layout(cfg);
  const std::vector<double> w = weights(layout);
  const int n = 17;
  const std::vector<std::int32_t> tokens = random_tokens(n, cfg.vocab_size, 4);
  Decoder whole(cfg, w, n, DType::F64);
  const std::vector<double> all = whole.step(tokens, true);
  EXPECT_EQ(whole.position(), n);

  Decoder incremental(cfg, w, n, DType::F64);
  // A prefill of 5, then one token at a time: each step's logits are the
  // whole run's row at that position.
  std::vector<double> last = incremental.step({tokens.begin(), tokens.begin() + 5});
  double worst = 0, scale = 0;
  auto compare = [&](int position, const std::vector<double>& got) {
    for (int v = 0; v < cfg.vocab_size; ++v) {
      const double ref = all[static_cast<std::size_t>(position) * cfg.vocab_size + v];
      worst = std::max(worst, std::abs(got[v] - ref));
      scale = std::max(scale, std::abs(ref));
    }
  };
  compare(4, last);
  for (int t = 5; t < n; ++t) compare(t, incremental.step({tokens[t]}));
  EXPECT_GT(scale, 0.1);
  EXPECT_LT(worst / scale, 1e-12);
  // The cache is full: one more position is refused; reset starts over.
  EXPECT_THROW(incremental.step({1}), UsageError);
  incremental.reset();
  const std::vector<double> again = incremental.step(tokens, true);
  EXPECT_EQ(again, all);
}

TEST(Decoder, Fp32MatchesFp64) {
  const ModelConfig cfg = small_config();
  const std::vector<double> w = weights(ParamLayout(cfg));
  const std::vector<std::int32_t> tokens = random_tokens(30, cfg.vocab_size, 6);
  Decoder f64(cfg, w, 30, DType::F64), f32(cfg, w, 30, DType::F32);
  const std::vector<double> a = f64.step(tokens, true), b = f32.step(tokens, true);
  double worst = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(a[i]));
  }
  EXPECT_LT(worst / scale, 1e-5);
  EXPECT_THROW(f32.step({cfg.vocab_size}), UsageError);  // token out of range
}

TEST(Sampler, GreedyTopKAndTopPPickTheMostLikely) {
  const std::vector<double> logits = {0.5, 2.0, -1.0, 2.0, 1.9};
  Rng rng(1);
  EXPECT_EQ(sample_token(logits, {0.0, 0, 1.0}, rng), 1);  // ties: lowest id
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(sample_token(logits, {1.0, 1, 1.0}, rng), 1);
    EXPECT_EQ(sample_token(logits, {1.0, 0, 1e-6}, rng), 1);
    const std::int32_t two = sample_token(logits, {1.0, 2, 1.0}, rng);
    EXPECT_TRUE(two == 1 || two == 3) << two;
    const std::int32_t three = sample_token(logits, {1.0, 3, 1.0}, rng);
    EXPECT_TRUE(three == 1 || three == 3 || three == 4) << three;
  }
}

TEST(Sampler, DrawsFollowTheTemperedSoftmaxAndRepeatWithTheSeed) {
  // Probabilities 1/7, 2/7, 4/7 at temperature 1; 1/21, 4/21, 16/21 at 0.5.
  const std::vector<double> logits = {0.0, std::log(2.0), std::log(4.0)};
  for (const auto& [temperature, want] :
       {std::pair{1.0, std::vector<double>{1 / 7.0, 2 / 7.0, 4 / 7.0}},
        std::pair{0.5, std::vector<double>{1 / 21.0, 4 / 21.0, 16 / 21.0}}}) {
    Rng rng(7);
    std::vector<int> count(3, 0);
    const int draws = 20000;
    for (int i = 0; i < draws; ++i) ++count[sample_token(logits, {temperature, 0, 1.0}, rng)];
    for (int v = 0; v < 3; ++v) {
      EXPECT_NEAR(count[v] / static_cast<double>(draws), want[v], 0.015) << temperature << " " << v;
    }
  }
  // top-p 0.5 keeps only the 4/7 token; 0.8 keeps the top two (4/7 + 2/7 >= 0.8).
  Rng rng(8);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(sample_token(logits, {1.0, 0, 0.5}, rng), 2);
    EXPECT_NE(sample_token(logits, {1.0, 0, 0.8}, rng), 0);
  }
  Rng a(9), b(9);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(sample_token(logits, {1.0, 0, 1.0}, a), sample_token(logits, {1.0, 0, 1.0}, b));
  }
}

TEST(Sampler, RefusesValuesOutOfRangeNamingTheFlag) {
  EXPECT_THROW(validate({-0.1, 0, 1.0}), UsageError);
  EXPECT_THROW(validate({1.0, -1, 1.0}), UsageError);
  EXPECT_THROW(validate({1.0, 0, 0.0}), UsageError);
  EXPECT_THROW(validate({1.0, 0, 1.5}), UsageError);
  try {
    validate({1.0, 0, 0.0});
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()), "--top-p 0: must lie in (0, 1] (1: no limit)");
  }
  validate({0.0, 5, 0.9});
}

TEST(ByteCodec, PromptsAreDocumentsOfBytesAndOtherIdsShowAsNumbers) {
  const ByteCodec codec;
  const std::string text = "h\xc3\xa9llo";  // UTF-8: 6 bytes
  const std::vector<std::int32_t> ids = codec.encode(text);
  ASSERT_EQ(ids.size(), 7u);
  EXPECT_EQ(ids[0], 256);  // end-of-text starts a document, as in training on text
  EXPECT_EQ(ids[2], 0xc3);
  EXPECT_EQ(codec.decode({ids.begin() + 1, ids.end()}), text);
  EXPECT_EQ(codec.decode({104, 300, 105, 256}), "h<300>i\n<|endoftext|>\n");
  EXPECT_EQ(codec.min_vocab(), 257);
}

}  // namespace
}  // namespace tinyllama
