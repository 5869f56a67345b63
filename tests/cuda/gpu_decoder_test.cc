// The CUDA decoder (src/cuda/cuda_decoder, src/ops/decode) against the CPU references on the
// same random weights: a prefill, then single-token steps, checking the
// logits of every step (LogitsCheck: float32 against the CPU decoder,
// bfloat16 against the rounded references of tests/infer). The models
// (tests/infer/decode_test_models.h) are awkward on purpose; prompts longer
// than one prefill chunk (CudaDecoder::kChunkRows), steps crossing the
// attention's cache chunks at positions that are multiples of nothing in
// particular. Then greedy generation token for token against the CPU in
// float32, and the batch-1 variants (the unfused GEMV, cuBLASLt, eager
// instead of the graph).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>

#include "cuda/cuda_decoder.h"
#include "gpu_test_util.h"
#include "infer/decode_test_models.h"
#include "infer/decoder.h"
#include "infer/rounded_reference.h"
#include "infer/sampler.h"
#include "model/init.h"

namespace tinyllama::gpu_test {
namespace {

using decode_test::model_config;
using decode_test::model_weights;
using decode_test::random_tokens;
using reference::autocast_limit;
using reference::Rounding;

// max |got - want| / max |want|; infinity for a non-finite value.
double rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  return reference::max_rel_error(got.data(), want.data(), static_cast<std::int64_t>(got.size()));
}

// Where a decoder's logits must lie: in float32 within 1e-4 of the CPU
// decoder in float64 on the weights rounded as the device stores them (a
// few layers of fp32 rounding), row by row. In bfloat16 a fixed figure
// cannot judge them (tests/infer/rounded_reference.h); the rounded
// references give two limits measured on the run's own weights and tokens,
// each over all of the run's logits (max |error| / max |reference|, as
// tests/python/test_parity.py measures a tensor):
//  * DESIGN §2's bar: the error against fp64 (unrounded weights) at most
//    twice torch.autocast's, emulated, plus one bf16 ulp;
//  * tight: against the same forward pass with the device's rounding points
//    done exactly, at most twice what other correct implementations at
//    those points (fp32 arithmetic where the device's is fp32, summed in
//    five ways, tensor cores' truncating sums among them:
//    reference::fp32_drift, the largest) are off by, plus one ulp. The test
//    models amplify a single value rounded the other way to about an ulp of
//    the logits, hence not a bare ulp; and which values round the other way
//    depends on how the sums are made, so one way's figure alone (up to 10x
//    below another's on these runs) was no measure of the device's own: a
//    prefill of 37 on model 1, whose prefill runs on tensor cores
//    (cuBLASLt), was 0.0203 from its points against a limit of 0.0182 from
//    sequential sums' 0.0052, where truncating sums drift 0.0075.
// A query at the wrong position or a skipped residual fails the tight
// limit (by 1.7x at the least, 20x mostly: rounded_reference_test.cc).
class LogitsCheck {
 public:
  LogitsCheck(const ModelConfig& cfg, const std::vector<double>& w,
              const std::vector<std::int32_t>& tokens, DType t)
      : vocab_(cfg.vocab_size), bf16_(t == DType::BF16) {
    if (bf16_) {
      exact_.logits = reference::forward_logits(cfg, w, tokens, {Rounding::None});
      device_.logits = reference::forward_logits(cfg, w, tokens, {Rounding::Device});
      autocast_error_ =
          rel_error(reference::forward_logits(cfg, w, tokens, {Rounding::Autocast}), exact_.logits);
      fp32_error_ = reference::fp32_drift(cfg, w, tokens, device_.logits);
    } else {
      std::vector<double> stored = w;
      for (double& x : stored) x = round_to(x, t);
      Decoder cpu(cfg, stored, static_cast<int>(tokens.size()), DType::F64);
      exact_.logits = cpu.step(tokens, true);
    }
  }

  // got: the logits of positions [first, first + rows).
  void add(const std::vector<double>& got, int first, const std::string& what) {
    const auto v = static_cast<std::size_t>(vocab_);
    ASSERT_EQ(got.size() % v, 0u) << what;
    ASSERT_LE(first * v + got.size(), exact_.logits.size()) << what;
    for (std::size_t r = 0; r < got.size() / v; ++r) {
      const std::size_t at = (first + r) * v;
      for (std::size_t i = 0; i < v; ++i) {
        const double g = got[r * v + i];
        if (!std::isfinite(g)) {
          ADD_FAILURE() << what << ", position " << first + r << ": logit " << i << " is " << g;
          return;
        }
        if (bf16_) {
          exact_.diff = std::max(exact_.diff, std::abs(g - exact_.logits[at + i]));
          device_.diff = std::max(device_.diff, std::abs(g - device_.logits[at + i]));
        }
      }
      if (!bf16_) {
        EXPECT_LE(reference::max_rel_error(got.data() + r * v, exact_.logits.data() + at, vocab_),
                  1e-4)
            << what << ", position " << first + r;
      }
    }
  }

  // The bf16 limits, over every logit add() saw.
  void finish(const std::string& what) const {
    if (!bf16_) return;
    const double err = exact_.diff / exact_.scale(), tight = device_.diff / device_.scale();
    const double bar = autocast_limit(autocast_error_);
    const double tight_limit = autocast_limit(fp32_error_);
    EXPECT_LE(err, bar) << what << ": against fp64 (autocast's error " << autocast_error_ << ")";
    EXPECT_LE(tight, tight_limit) << what << ": against the device's rounding points (fp32 "
                                  << "arithmetic off by up to " << fp32_error_ << ")";
    std::printf(
        "  %s: bf16 logits against fp64 %.4f (limit %.4f), against the device's rounding "
        "points %.4f (limit %.4f)\n",
        what.c_str(), err, bar, tight, tight_limit);
  }

 private:
  // Logits of every position, and the largest |got - them| seen so far.
  struct Reference {
    std::vector<double> logits;
    double diff = 0;
    double scale() const {
      double m = 0;
      for (double x : logits) m = std::max(m, std::abs(x));
      return m;
    }
  };

  int vocab_;
  bool bf16_;
  Reference exact_, device_;
  double autocast_error_ = 0, fp32_error_ = 0;
};

// Runs a prefill of `prompt` tokens and then `steps` single tokens on the
// CUDA decoder, checking every step's logits (LogitsCheck).
void compare_steps(const ModelConfig& cfg, const std::vector<double>& w, int prompt, int steps,
                   const CudaDecodeOptions& options, std::uint64_t seed) {
  const int positions = prompt + steps;
  const std::vector<std::int32_t> tokens = random_tokens(positions, cfg.vocab_size, seed);
  LogitsCheck check(cfg, w, tokens, options.dtype);
  cuda::CudaDecoder gpu(cfg, w, positions, options);
  const std::vector<std::int32_t> head(tokens.begin(), tokens.begin() + prompt);
  const std::string run = "prefill of " + std::to_string(prompt);
  // The prefill's logits at every position, then the last one's alone.
  check.add(gpu.step(head, true), 0, run + " (all logits)");
  for (int round = 0; round < 2; ++round) {
    for (int t = prompt; t < positions; ++t) {
      check.add(gpu.step({tokens[t]}), t, "step after a " + run + (round ? ", after reset" : ""));
    }
    EXPECT_EQ(gpu.position(), positions);
    EXPECT_THROW(gpu.step({0}), UsageError);  // the cache is full
    if (round == 0) {
      // A reset cache replays the same positions again (the graph reads them).
      gpu.reset();
      check.add(gpu.step(head), prompt - 1, run + " after reset");
    }
  }
  check.finish(run + " and " + std::to_string(steps) + " steps");
  EXPECT_EQ(gpu.graph_captured(), options.graph);
}

using DecoderParam = std::tuple<DType, int>;  // (dtype, config)

class GpuDecoder : public GpuParamTest<DecoderParam> {};

TEST_P(GpuDecoder, StepsMatchTheCpuDecoder) {
  const auto [t, index] = GetParam();
  const ModelConfig cfg = model_config(index);
  const std::vector<double> w = model_weights(ParamLayout(cfg), 11 + index);
  CudaDecodeOptions options;
  options.dtype = t;
  // 1: a decode from the first position; 37: one prefill chunk; 150: two.
  for (int prompt : {1, 37, 150}) {
    compare_steps(cfg, w, prompt, 9, options, 100 + prompt);
  }
}

std::string decoder_name(const ::testing::TestParamInfo<DecoderParam>& info) {
  const auto [t, index] = info.param;
  const ModelConfig c = model_config(index);
  return dtype_label(t) + "_H" + std::to_string(c.num_heads) + "K" +
         std::to_string(c.num_kv_heads) + "_hd" + std::to_string(c.head_dim()) + "_V" +
         std::to_string(c.vocab_size);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuDecoder,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16),
                                            ::testing::Range(0, decode_test::kModels)),
                         decoder_name);

// The batch-1 paths the CLI can pick for timing compute the same thing
// (the fused and the unfused GEMVs round at the same points).
TEST_F(GpuTest, DecoderCublasltAndEagerStepsMatchTheCpuDecoder) {
  const ModelConfig cfg = model_config(1);
  const std::vector<double> w = model_weights(ParamLayout(cfg), 3);
  for (const CudaDecodeOptions& o :
       {CudaDecodeOptions{DType::F32, false, true}, CudaDecodeOptions{DType::F32, true, false},
        CudaDecodeOptions{DType::BF16, false, false},
        CudaDecodeOptions{DType::F32, true, true, false},
        CudaDecodeOptions{DType::BF16, true, true, false},
        CudaDecodeOptions{DType::BF16, true, false, true},
        CudaDecodeOptions{DType::BF16, true, true, true, false}}) {
    SCOPED_TRACE(std::string(!o.own_gemv ? "cublaslt"
                             : o.fused   ? (o.programmatic ? "fused gemv, pdl" : "fused gemv")
                                         : "own gemv") +
                 (o.graph ? ", graph" : ", eager") + ", " + dtype_label(o.dtype));
    compare_steps(cfg, w, 20, 70, o, 5);  // 90 positions: six cache chunks of 15
  }
}

// Greedy decoding picks the same tokens on both devices in float32: the
// logits agree to ~1e-6 and random weights leave gaps far above that.
TEST_F(GpuTest, GreedyGenerationEqualsTheCpuInFloat32) {
  const ModelConfig cfg = model_config(1);
  const std::vector<double> w = model_weights(ParamLayout(cfg), 8);
  const std::vector<std::int32_t> prompt = random_tokens(6, cfg.vocab_size, 9);
  const int new_tokens = 60;
  const int positions = static_cast<int>(prompt.size()) + new_tokens;
  Decoder cpu(cfg, w, positions, DType::F32);
  cuda::CudaDecoder gpu(cfg, w, positions, {DType::F32, true, true});
  const SamplingOptions greedy{0.0, 0, 1.0};
  Rng rng(1);
  std::vector<double> a = cpu.step(prompt), b = gpu.step(prompt);
  std::vector<std::int32_t> from_cpu, from_gpu;
  for (int i = 0; i < new_tokens; ++i) {
    from_cpu.push_back(sample_token(a, greedy, rng));
    from_gpu.push_back(sample_token(b, greedy, rng));
    ASSERT_EQ(from_gpu.back(), from_cpu.back()) << "token " << i;
    if (i + 1 < new_tokens) {
      a = cpu.step({from_cpu.back()});
      b = gpu.step({from_gpu.back()});
    }
  }
  // Not a constant continuation: the comparison saw the model work.
  std::sort(from_cpu.begin(), from_cpu.end());
  EXPECT_GE(std::unique(from_cpu.begin(), from_cpu.end()) - from_cpu.begin(), 3);
}

TEST_F(GpuTest, DecoderRefusesWhatItCannotRun) {
  const ModelConfig cfg = model_config(0);
  const std::vector<double> w = model_weights(ParamLayout(cfg), 1);
  EXPECT_THROW(cuda::CudaDecoder(cfg, w, 8, {DType::F16, true, true}), UsageError);
  EXPECT_THROW(cuda::CudaDecoder(cfg, w, 0, {DType::F32, true, true}), UsageError);
  EXPECT_THROW(cuda::CudaDecoder(cfg, std::vector<double>(3, 1.0), 8, {}), RuntimeFailure);
  cuda::CudaDecoder d(cfg, w, 4, {});
  EXPECT_THROW(d.step({cfg.vocab_size}), UsageError);
  EXPECT_THROW(d.step({}), UsageError);
  EXPECT_THROW(d.step({1, 2, 3, 4, 5}), UsageError);
  EXPECT_EQ(d.position(), 0);
}

}  // namespace
}  // namespace tinyllama::gpu_test
