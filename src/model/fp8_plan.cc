// The per-GEMM FP8 choice (fp8_plan.h).
//
// The rates are what tinyllama_fp8_gemm_bench measured on an H200
// (docs/log/2026-11-28.md, sixth session): cuBLASLt's bf16 GEMMs ran at
// 700-800 TFLOP/s and its FP8 GEMMs at 1 200-1 370 at the 1 B shapes, and
// neither went below about 8 us at the workshop's; a quantisation is three
// launches (amax, scale, cast; one under delayed scaling), each a few
// microseconds at small sizes, and
// moves its bytes near HBM speed at large ones.
#include "model/fp8_plan.h"

#include <algorithm>
#include <cstdio>

namespace tinyllama {
namespace {

constexpr double kBf16FlopsPerMs = 750e9;  // 750 TFLOP/s
constexpr double kFp8FlopsPerMs = 1300e9;  // 1 300 TFLOP/s
constexpr double kGemmFloorMs = 0.008;     // the smallest GEMM's time
constexpr double kBytesPerMs = 3.0e9;      // 3 TB/s
constexpr double kLaunchMs = 0.003;        // one small kernel

bool multiple_of_16(std::int64_t v) {
  return v % 16 == 0;
}

// The three GEMMs of one linear, and the casts each set of FP8 GEMMs needs:
// the forward quantises x and W (amax and a row-major copy each); the data
// gradient reads dy and W^T, the weight gradient dy^T and x^T. dy's amax is
// paid once for both; x's and W's only when the forward did not keep them.
// Under delayed scaling no cast has an amax pass: the cast records it.
// x_produced / x_t_produced / dy_produced: the kernel that computes x
// (x^T, dy) writes its codes (Fp8Producers).
struct LinearCosts {
  LinearShape s;
  Fp8Scaling scaling;
  bool x_produced = false;
  bool x_t_produced = false;
  bool x_t_beside_fp8_forward = false;  // x^T written with the forward's FP8 copy
  bool dy_produced = false;
  bool amax(bool scale_kept = false) const { return scaling == Fp8Scaling::Current && !scale_kept; }
  double gemm(LinearPass p, bool fp8) const {
    switch (p) {
      case LinearPass::Forward:
        return gemm_estimate_ms(s.tokens, s.out, s.in, fp8);
      case LinearPass::Dgrad:
        return gemm_estimate_ms(s.tokens, s.in, s.out, fp8);
      case LinearPass::Wgrad:
        return gemm_estimate_ms(s.out, s.in, s.tokens, fp8);
    }
    return 0;
  }
  double forward(bool fp8) const {
    if (!fp8) return gemm(LinearPass::Forward, false);
    const double x_cast = x_produced ? producer_cast_estimate_ms(s.tokens * s.in, 1)
                                     : quantize_estimate_ms(s.tokens * s.in, 1, amax());
    return gemm(LinearPass::Forward, true) + x_cast + quantize_estimate_ms(s.out * s.in, 1, amax());
  }
  double backward(bool dgrad, bool wgrad, bool forward_fp8) const {
    double t = gemm(LinearPass::Dgrad, dgrad) + gemm(LinearPass::Wgrad, wgrad);
    const int dy_copies = (dgrad ? 1 : 0) + (wgrad ? 1 : 0);
    if (dy_copies > 0) {
      t += dy_produced ? producer_cast_estimate_ms(s.tokens * s.out, dy_copies)
                       : quantize_estimate_ms(s.tokens * s.out, dy_copies, amax());
    }
    if (dgrad) t += quantize_estimate_ms(s.out * s.in, 1, amax(forward_fp8));
    if (wgrad) {
      const bool made = x_t_produced || (x_t_beside_fp8_forward && forward_fp8);
      t += made ? producer_cast_estimate_ms(s.tokens * s.in, 1)
                : quantize_estimate_ms(s.tokens * s.in, 1, amax(forward_fp8));
    }
    return t;
  }
};

// Linear `kind`'s costs, with the operands the producers write.
LinearCosts linear_costs(const ModelConfig& cfg, BatchShape shape, LinearKind kind,
                         Fp8Scaling scaling, Fp8Producers p) {
  LinearCosts c{linear_shape(cfg, shape, kind), scaling};
  switch (kind) {
    case LinearKind::Qkv:
    case LinearKind::GateUp:
      c.x_produced = p.forward_norms;
      c.x_t_produced = p.recomputed_norms;
      c.dy_produced = p.swiglu && kind == LinearKind::GateUp;
      break;
    case LinearKind::Down:
      // Beside the forward's copy, with its scale (conservative: the
      // backward's recompute writes it whatever the forward was).
      c.x_produced = p.swiglu;
      c.x_t_beside_fp8_forward = p.swiglu;
      break;
    case LinearKind::OutProj:
      break;
  }
  return c;
}

}  // namespace

const char* linear_name(LinearKind k) {
  switch (k) {
    case LinearKind::Qkv:
      return "qkv";
    case LinearKind::OutProj:
      return "out_proj";
    case LinearKind::GateUp:
      return "gate_up";
    case LinearKind::Down:
      return "down";
  }
  return "?";
}

const char* linear_pass_name(LinearPass p) {
  switch (p) {
    case LinearPass::Forward:
      return "forward";
    case LinearPass::Dgrad:
      return "dgrad";
    case LinearPass::Wgrad:
      return "wgrad";
  }
  return "?";
}

LinearShape linear_shape(const ModelConfig& cfg, BatchShape shape, LinearKind k) {
  const std::int64_t t = shape.tokens();
  switch (k) {
    case LinearKind::Qkv:
      return {t, cfg.hidden_dim, cfg.qkv_dim()};
    case LinearKind::OutProj:
      return {t, cfg.q_dim(), cfg.hidden_dim};
    case LinearKind::GateUp:
      return {t, cfg.hidden_dim, 2LL * cfg.ffn_dim};
    case LinearKind::Down:
      return {t, cfg.ffn_dim, cfg.hidden_dim};
  }
  return {};
}

double gemm_estimate_ms(std::int64_t m, std::int64_t n, std::int64_t k, bool fp8) {
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  return std::max(kGemmFloorMs, flops / (fp8 ? kFp8FlopsPerMs : kBf16FlopsPerMs));
}

double quantize_estimate_ms(std::int64_t elems, int copies, bool amax) {
  // bf16 in (twice with the amax pass), a byte out per copy.
  const double bytes = static_cast<double>(elems) * ((amax ? 4.0 : 2.0) + copies);
  return (amax ? 3 : 1) * kLaunchMs + bytes / kBytesPerMs;
}

double producer_cast_estimate_ms(std::int64_t elems, int copies) {
  return static_cast<double>(elems) * copies / kBytesPerMs;
}

bool Fp8Linears::any() const {
  for (const auto& passes : use) {
    for (const bool b : passes) {
      if (b) return true;
    }
  }
  return false;
}

std::string Fp8Linears::describe() const {
  std::string out;
  const char* pass_short[] = {"fwd", "dgrad", "wgrad"};
  double bf16 = 0, chosen = 0;
  for (int k = 0; k < kLinearKinds; ++k) {
    if (!out.empty()) out += ", ";
    out += linear_name(static_cast<LinearKind>(k));
    bool none = true;
    for (int p = 0; p < kLinearPasses; ++p) {
      if (!use[k][p]) continue;
      out += std::string(" ") + pass_short[p];
      none = false;
    }
    if (none) out += " bf16";
    bf16 += bf16_ms[k];
    chosen += chosen_ms[k];
  }
  char est[96];
  std::snprintf(est, sizeof(est), " (estimated %.2f ms per layer against bf16's %.2f)", chosen,
                bf16);
  if (swiglu_casts) out += "; the SwiGLU kernel writes its FP8 codes";
  if (norm_casts) out += "; the norms write theirs";
  if (master_weights) out += "; the FP8 weights are cast from the fp32 master (no bf16 copy)";
  if (swiglu_grad_codes_only) out += "; the gate/up gradient is kept as FP8 codes only";
  if (swiglu_keeps_codes) out += "; the SwiGLU output is kept as FP8 codes only";
  return out + est;
}

const char* fp8_scaling_name(Fp8Scaling s) {
  return s == Fp8Scaling::Delayed ? "delayed" : "current";
}

Fp8Linears choose_fp8_linears(const ModelConfig& cfg, BatchShape shape, Fp8Choice choice,
                              Fp8Scaling scaling, Fp8Producers producers) {
  Fp8Linears f;
  f.scaling = scaling;
  if (scaling != Fp8Scaling::Delayed) producers = Fp8Producers{};
  for (int k = 0; k < kLinearKinds; ++k) {
    const auto kind = static_cast<LinearKind>(k);
    const LinearShape s = linear_shape(cfg, shape, kind);
    const LinearCosts c = linear_costs(cfg, shape, kind, scaling, producers);
    const double bf16 = c.forward(false) + c.backward(false, false, false);
    f.bf16_ms[k] = bf16;
    f.chosen_ms[k] = bf16;
    if (!multiple_of_16(s.tokens) || !multiple_of_16(s.in) || !multiple_of_16(s.out)) continue;
    if (choice == Fp8Choice::All) {
      f.use[k] = {true, true, true};
      f.chosen_ms[k] = c.forward(true) + c.backward(true, true, true);
      continue;
    }
    // The eight combinations together: an FP8 forward also makes the
    // backward's casts of x and W cheaper (their scales kept).
    double best = bf16;
    for (const bool fwd : {false, true}) {
      for (const bool d : {false, true}) {
        for (const bool w : {false, true}) {
          const double t = c.forward(fwd) + c.backward(d, w, fwd);
          if (t < best) {
            best = t;
            f.use[k] = {fwd, d, w};
          }
        }
      }
    }
    f.chosen_ms[k] = best;
  }
  f.swiglu_casts = producers.swiglu &&
                   (f.at(LinearKind::Down, LinearPass::Forward) ||
                    f.at(LinearKind::Down, LinearPass::Wgrad) || f.backward(LinearKind::GateUp));
  return f;
}

}  // namespace tinyllama
