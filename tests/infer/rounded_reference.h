#pragma once
// A float64 forward pass of the model (DESIGN §1) over a whole token row,
// with values rounded to bfloat16 at chosen points: the references that the
// CUDA decoder's bfloat16 logits are held to (tests/cuda/gpu_decoder_test.cc).
// Step t of a decoder gives row t's logits here, since attention is causal.
//
// A low-precision result's error depends on the weights, the shapes and the
// reduction lengths, so no fixed tolerance fits it (tests/python/README.md).
// What is fixed is where a run rounds; emulating those points in float64
// gives two measured figures on the very weights and tokens of a test:
//  * Rounding::Autocast: PyTorch's own error, torch.autocast(bfloat16) on
//    test_parity.py's model (the bar of DESIGN §2: tinyllama's error
//    against fp64 at most twice autocast's, plus one bf16 ulp);
//  * Rounding::Device: the CUDA decoder's rounding points, so the device's
//    result can be compared with the same rounding done exactly: what is
//    left is fp32 summation order, a tight check.
// Written with plain loops on purpose, apart from the CPU ops, so the
// reference shares no code with what it checks.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/tolerance.h"

namespace tinyllama::reference {

enum class Rounding {
  None,      // float64 throughout
  Device,    // the CUDA decoder in bfloat16 (list in rounded_reference.cc)
  Autocast,  // torch.autocast(bfloat16): matmul operands and outputs, the rest fp32
};

// Deliberate bugs, to show that the comparisons fail on them.
enum class Fault {
  None,
  // Queries rotated one position too far, keys where they belong (RoPE is
  // relative: both shifted alike would change nothing but rounding).
  QueryPositionOffByOne,
  NoAttentionResidual,  // x = Wo attn(n1(x)), the residual add skipped
};

// How a float32 run sums products (ForwardOptions::order).
enum class Summation {
  Sequential,  // first to last, each sum rounded to nearest (an FMA)
  Reversed,    // last to first
  Lanes8,      // 32 lanes each summing runs of 8 (a 16-byte bf16 load), then a butterfly
  Lanes4,      // the same with runs of 4 (a 16-byte fp32 load)
  // First to last, each sum rounded toward zero: how tensor cores add
  // products into an fp32 accumulator (Fasi, Higham, Mikaitis, Pranesh,
  // "Numerical behavior of NVIDIA tensor cores", 2021), as the prefill's
  // cuBLASLt GEMMs do; biased, so its values drift further.
  TowardZero,
};
inline constexpr Summation kSummations[] = {Summation::Sequential, Summation::Reversed,
                                            Summation::Lanes8, Summation::Lanes4,
                                            Summation::TowardZero};

struct ForwardOptions {
  Rounding rounding = Rounding::None;
  // float32 arithmetic where the device computes in float32 (the sums of
  // the products, in `order`; RMSNorm's statistics and scaling; RoPE's
  // rotation; the softmax; SwiGLU; the residual adds) instead of float64:
  // another correct implementation at the same rounding points, whose
  // values now and then round to the neighbouring bf16 number.
  bool fp32_arithmetic = false;
  Fault fault = Fault::None;
  Summation order = Summation::Sequential;
};

// Logits [tokens.size(), vocab] row-major; params in tinyllama's flat
// layout (ParamLayout of cfg).
std::vector<double> forward_logits(const ModelConfig& cfg, const std::vector<double>& params,
                                   const std::vector<std::int32_t>& tokens,
                                   const ForwardOptions& options);

// max |got - want| / max |want| over count elements (infinity for a
// non-finite value): the metric of test_parity.py, as model/tolerance.h
// defines it for every check.
inline double max_rel_error(const double* got, const double* want, std::int64_t count) {
  return tinyllama::max_rel_error(got, want, static_cast<std::size_t>(count));
}

// One bf16 ulp relative to a tensor's largest element, bounded above
// (torch.finfo(torch.bfloat16).eps): test_parity.py's floor, the finest two
// correct roundings of the same value can be held to.
inline constexpr double kBf16Ulp = 1.0 / 128;

// test_parity.py's limit: twice autocast's error plus one ulp.
inline double autocast_limit(double autocast_error) {
  return 2 * autocast_error + kBf16Ulp;
}

// How far float32 arithmetic at the device's rounding points is from the
// same points done exactly, over a run's logits: the largest over the
// summations of kSummations. One alone is a poor measure: the models
// amplify the few values that round the other way, and which ones do
// depends on the order (on the GPU test's runs one order's figure is up to
// 10x another's), so the device's own (a GEMV's lanes, cuBLASLt's tiles on
// tensor cores) can land anywhere in that spread.
double fp32_drift(const ModelConfig& cfg, const std::vector<double>& params,
                  const std::vector<std::int32_t>& tokens,
                  const std::vector<double>& device_logits);

}  // namespace tinyllama::reference
