// The CUDA decoder (src/cuda/decode) against the CPU Decoder in float64 on
// the same random weights: a prefill, then single-token steps, comparing
// the logits of every step. Shapes are awkward on purpose: GQA groups 1, 2,
// 3 and 4, head_dim 32, 34, 64 and 128 (34 and the odd widths take the
// GEMV's scalar path), odd vocabularies, prompts longer than one prefill
// chunk (CudaDecoder::kChunkRows), and steps crossing the attention's cache
// chunks at positions that are multiples of nothing in particular. Then
// greedy generation token for token against the CPU in float32, and the
// batch-1 variants (cuBLASLt instead of the GEMV, eager instead of the
// graph).
#include <algorithm>
#include <cmath>
#include <tuple>

#include "cuda/decode/cuda_decoder.h"
#include "gpu_test_util.h"
#include "infer/decoder.h"
#include "infer/sampler.h"
#include "model/init.h"

namespace tinyllama::gpu_test {
namespace {

// vocab, hidden, layers, heads, kv heads, ffn
ModelConfig config(int index) {
  ModelConfig c;
  c.num_layers = 2;
  switch (index) {
    case 0:  // group 1, head_dim 32
      c.vocab_size = 97, c.hidden_dim = 128, c.num_heads = 4, c.num_kv_heads = 4, c.ffn_dim = 100;
      break;
    case 1:  // group 2, head_dim 64
      c.vocab_size = 301, c.hidden_dim = 256, c.num_heads = 4, c.num_kv_heads = 2, c.ffn_dim = 200;
      break;
    case 2:  // group 4, head_dim 128
      c.vocab_size = 131, c.hidden_dim = 512, c.num_heads = 4, c.num_kv_heads = 1, c.ffn_dim = 264;
      c.num_layers = 1;
      break;
    default:  // group 3, head_dim 34: widths that are not multiples of 8
      c.vocab_size = 53, c.hidden_dim = 102, c.num_heads = 3, c.num_kv_heads = 1, c.ffn_dim = 70;
      break;
  }
  return c;
}

// Larger than init's N(0, 0.02), so attention and RoPE visibly matter.
std::vector<double> weights(const ParamLayout& layout, std::uint64_t seed) {
  std::vector<double> w = initial_weights(layout, seed);
  Rng rng(seed + 1);
  for (const ParamSlot& s : layout.slots()) {
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      w[s.offset + i] += s.is_norm ? 0.2 * rng.normal() : 0.15 * rng.normal();
    }
  }
  return w;
}

std::vector<std::int32_t> random_tokens(int n, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocab)));
  return t;
}

// max |got - want| / max |want|; infinity for a non-finite value.
double rel_error(const std::vector<double>& got, const std::vector<double>& want) {
  if (got.size() != want.size()) return INFINITY;
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    diff = std::max(diff, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return diff / scale;
}

// Whole-model tolerances on the logits, as gpu_model_test's on the loss
// and gradients: fp32 compounds a few layers of fp32 rounding; bf16 keeps
// activations and the cache in bf16 through every op (the reference's
// weights are rounded as the device's are).
double model_tolerance(DType t) {
  return t == DType::F32 ? 1e-4 : 5e-2;
}

// Runs a prefill of `prompt` tokens and then `steps` single tokens on both
// decoders, expecting every step's logits within tol.
void compare_steps(const ModelConfig& cfg, const std::vector<double>& w, int prompt, int steps,
                   const CudaDecodeOptions& options, std::uint64_t seed) {
  const int positions = prompt + steps;
  const std::vector<std::int32_t> tokens = random_tokens(positions, cfg.vocab_size, seed);
  // The reference holds the weights as the device does (rounded to its
  // dtype), so the comparison measures the decode's arithmetic, not the
  // storage of the weights (which a bf16 checkpoint has anyway).
  std::vector<double> stored = w;
  for (double& x : stored) x = round_to(x, options.dtype);
  Decoder cpu(cfg, stored, positions, DType::F64);
  cuda::CudaDecoder gpu(cfg, w, positions, options);
  const double tol = model_tolerance(options.dtype);
  const std::vector<std::int32_t> head(tokens.begin(), tokens.begin() + prompt);
  // The prefill's logits at every position, then the last one's alone.
  const std::vector<double> want_all = cpu.step(head, true);
  const std::vector<double> got_all = gpu.step(head, true);
  EXPECT_LE(rel_error(got_all, want_all), tol) << "prefill of " << prompt << " (all logits)";
  for (int round = 0; round < 2; ++round) {
    for (int t = prompt; t < positions; ++t) {
      const std::vector<double> want = cpu.step({tokens[t]});
      const std::vector<double> got = gpu.step({tokens[t]});
      EXPECT_LE(rel_error(got, want), tol) << "step at position " << t << " after a prefill of "
                                           << prompt << (round ? ", after reset" : "");
    }
    EXPECT_EQ(gpu.position(), positions);
    EXPECT_THROW(gpu.step({0}), UsageError);  // the cache is full
    if (round == 0) {
      // A reset cache replays the same positions again (the graph reads them).
      cpu.reset();
      gpu.reset();
      const std::vector<double> want = cpu.step(head);
      const std::vector<double> got = gpu.step(head);
      EXPECT_LE(rel_error(got, want), tol) << "prefill of " << prompt << " after reset";
    }
  }
  EXPECT_EQ(gpu.graph_captured(), options.graph);
}

using DecoderParam = std::tuple<DType, int>;  // (dtype, config)

class GpuDecoder : public GpuParamTest<DecoderParam> {};

TEST_P(GpuDecoder, StepsMatchTheCpuDecoder) {
  const auto [t, index] = GetParam();
  const ModelConfig cfg = config(index);
  const std::vector<double> w = weights(ParamLayout(cfg), 11 + index);
  CudaDecodeOptions options;
  options.dtype = t;
  // 1: a decode from the first position; 37: one prefill chunk; 150: two.
  for (int prompt : {1, 37, 150}) {
    compare_steps(cfg, w, prompt, 9, options, 100 + prompt);
  }
}

std::string decoder_name(const ::testing::TestParamInfo<DecoderParam>& info) {
  const auto [t, index] = info.param;
  const ModelConfig c = config(index);
  return dtype_label(t) + "_H" + std::to_string(c.num_heads) + "K" +
         std::to_string(c.num_kv_heads) + "_hd" + std::to_string(c.head_dim()) + "_V" +
         std::to_string(c.vocab_size);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuDecoder,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16),
                                            ::testing::Values(0, 1, 2, 3)),
                         decoder_name);

// The batch-1 paths the CLI can pick for timing compute the same thing.
TEST_F(GpuTest, DecoderCublasltAndEagerStepsMatchTheCpuDecoder) {
  const ModelConfig cfg = config(1);
  const std::vector<double> w = weights(ParamLayout(cfg), 3);
  for (const CudaDecodeOptions& o :
       {CudaDecodeOptions{DType::F32, false, true}, CudaDecodeOptions{DType::F32, true, false},
        CudaDecodeOptions{DType::BF16, false, false}}) {
    SCOPED_TRACE(std::string(o.own_gemv ? "own gemv" : "cublaslt") + (o.graph ? ", graph" : ""));
    compare_steps(cfg, w, 20, 70, o, 5);  // 90 positions: two cache chunks of 45
  }
}

// Greedy decoding picks the same tokens on both devices in float32: the
// logits agree to ~1e-6 and random weights leave gaps far above that.
TEST_F(GpuTest, GreedyGenerationEqualsTheCpuInFloat32) {
  const ModelConfig cfg = config(1);
  const std::vector<double> w = weights(ParamLayout(cfg), 8);
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
  const ModelConfig cfg = config(0);
  const std::vector<double> w = weights(ParamLayout(cfg), 1);
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
