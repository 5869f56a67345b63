// The FP8 choice (model/fp8_plan.h) and how resolve_plan applies it: FP8
// where the estimate says the GEMM with its casts is faster (the 1 B
// model's GEMMs, not the workshop's small ones), every GEMM under
// Fp8Choice::All, none where a dimension breaks cuBLASLt's rule of 16 or
// the device has no FP8 tensor cores (with the reason), and the SwiGLU
// epilogue given up where its GEMM goes FP8.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "arena_cover.h"
#include "model/activation_plan.h"
#include "model/model.h"
#include "model/step_plan.h"
#include "model/step_plan_json.h"
#include "model/test_plans.h"

namespace tinyllama {
namespace {

ModelConfig one_b() {
  ModelConfig c;
  c.hidden_dim = 2048;
  c.num_layers = 16;
  c.num_heads = 32;
  c.num_kv_heads = 16;
  c.ffn_dim = 8192;
  c.vocab_size = 32000;
  return c;
}

ModelConfig workshop() {
  ModelConfig c;
  c.hidden_dim = 512;
  c.num_layers = 8;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.ffn_dim = 2048;
  c.vocab_size = 1000;
  return c;
}

DeviceCaps fp8_caps() {
  DeviceCaps caps = graph_capable_cpu_caps();
  caps.kind = DeviceKind::Cuda;
  caps.flash_head_dims = {32, 64, 128};
  caps.no_programmatic_launch = "";
  caps.no_hopper_kernels = "";
  caps.no_fp8_gemm = "";
  return caps;
}

// A float8 run's request at `level`, its other settings the defaults.
PlanRequest fp8_request(Fp8Choice choice = Fp8Choice::Auto, const std::string& level = "v4") {
  PlanRequest r;
  r.level = level;
  r.ops = level_preset(level);
  r.precision = Precision::amp_fp8();
  r.fp8_gemms = choice;
  return r;
}

StepPlan fp8_plan(const ModelConfig& cfg, BatchShape shape, Fp8Choice choice = Fp8Choice::Auto,
                  const DeviceCaps& caps = fp8_caps(), const std::string& level = "v4") {
  return resolve_plan(fp8_request(choice, level), caps, cfg, shape);
}

bool has_fallback(const StepPlan& p, const std::string& op) {
  for (const Fallback& f : p.fallbacks) {
    if (f.op == op) return true;
  }
  return false;
}

// With the casts as separate passes, only the largest GEMMs gain: at 1 B
// the gate/up projection's three (the tinyllama_fp8_gemm_bench table of
// docs/log/2026-11-28.md, sixth session, agrees), not the out projection's.
TEST(Fp8Plan, TheOneBillionModelsGateUpGoesFp8AndTheWorkshopsStaysBf16) {
  const Fp8Linears big = choose_fp8_linears(one_b(), BatchShape{8, 1024});
  const int gu = static_cast<int>(LinearKind::GateUp);
  for (int p = 0; p < kLinearPasses; ++p) EXPECT_TRUE(big.use[gu][p]) << p;
  EXPECT_LT(big.chosen_ms[gu], 0.85 * big.bf16_ms[gu]);
  EXPECT_FALSE(big.at(LinearKind::OutProj, LinearPass::Forward));
  const Fp8Linears small = choose_fp8_linears(workshop(), BatchShape{8, 128});
  EXPECT_FALSE(small.any());
  for (int k = 0; k < kLinearKinds; ++k) EXPECT_EQ(small.chosen_ms[k], small.bf16_ms[k]);
}

// Auto takes the least estimate over every combination of the three
// passes, so it is never above bf16's nor all-FP8's (an FP8 forward makes
// the backward's casts cheaper too: the choice is joint).
TEST(Fp8Plan, EachChoiceIsTheLeastEstimateOfItsLinear) {
  for (const ModelConfig& cfg : {workshop(), one_b()}) {
    for (const BatchShape s : {BatchShape{8, 128}, BatchShape{32, 1024}, BatchShape{4, 512}}) {
      const Fp8Linears f = choose_fp8_linears(cfg, s);
      const Fp8Linears all = choose_fp8_linears(cfg, s, Fp8Choice::All);
      for (int k = 0; k < kLinearKinds; ++k) {
        EXPECT_LE(f.chosen_ms[k], f.bf16_ms[k]);
        EXPECT_LE(f.chosen_ms[k], all.chosen_ms[k]);
      }
    }
  }
}

TEST(Fp8Plan, AllPutsEveryGemmInFp8AndARuleOf16BreakerNone) {
  const Fp8Linears all = choose_fp8_linears(workshop(), BatchShape{8, 128}, Fp8Choice::All);
  for (int k = 0; k < kLinearKinds; ++k) {
    for (int p = 0; p < kLinearPasses; ++p) EXPECT_TRUE(all.use[k][p]);
  }
  ModelConfig odd = workshop();
  odd.ffn_dim = 2044;  // 2F = 4088 and F: not multiples of 16, gate/up and down stay bf16
  const Fp8Linears f = choose_fp8_linears(odd, BatchShape{8, 128}, Fp8Choice::All);
  EXPECT_TRUE(f.at(LinearKind::Qkv, LinearPass::Forward));
  EXPECT_FALSE(f.at(LinearKind::GateUp, LinearPass::Forward));
  EXPECT_FALSE(f.backward(LinearKind::Down));
}

TEST(Fp8Plan, NoFp8TensorCoresFallBackToBf16WithTheReason) {
  DeviceCaps ampere = fp8_caps();
  ampere.no_fp8_gemm = "FP8 tensor cores need compute capability 8.9 or newer";
  const StepPlan p = fp8_plan(one_b(), BatchShape{8, 1024}, Fp8Choice::All, ampere);
  EXPECT_FALSE(p.fp8.any());
  ASSERT_TRUE(has_fallback(p, "linear_gemms"));
  EXPECT_EQ(p.precision.compute, DType::BF16);
}

TEST(Fp8Plan, SeparateProjectionsFallBack) {
  const StepPlan p = fp8_plan(one_b(), BatchShape{8, 1024}, Fp8Choice::All, fp8_caps(), "v1");
  EXPECT_FALSE(p.fp8.any());
  EXPECT_TRUE(has_fallback(p, "linear_gemms"));
}

TEST(Fp8Plan, TheSwigluEpilogueGoesWhereItsGemmIsFp8) {
  const StepPlan p = fp8_plan(one_b(), BatchShape{8, 1024});
  ASSERT_TRUE(p.fp8.at(LinearKind::GateUp, LinearPass::Forward));
  EXPECT_NE(p.ops.swiglu, SwigluImpl::Gemm);
  // The plan says so, and what runs in FP8, in --json.
  const nlohmann::json j = plan_json(p);
  EXPECT_EQ(j.at("precision"), "amp_float8");
  EXPECT_EQ(j.at("fp8_gemms").at("gate_up").at("fp8_passes").size(), 3u);
  EXPECT_NE(p.fp8.describe().find("gate_up fwd dgrad wgrad"), std::string::npos)
      << p.fp8.describe();
}

TEST(Fp8Plan, TheArenaHoldsTheCopiesTheChosenGemmsRead) {
  const BatchShape s{2, 64};
  // The scratch apart, so that every copy takes bytes of its own.
  StepPlan bf16 = plan_for_level("v4", Precision::amp(DType::BF16), fp8_caps(), workshop(), s);
  StepPlan all = fp8_plan(workshop(), s, Fp8Choice::All);
  bf16.scratch_over_logits = false;
  all.scratch_over_logits = false;
  const ActivationPlan a(workshop(), s, all);
  const ActivationPlan b(workshop(), s, bf16);
  ASSERT_TRUE(a.fp8.used());
  EXPECT_FALSE(b.fp8.used());
  // Per linear, dy, dy^T and x^T; the forward's x and W and the data
  // gradient's W^T shared: the largest of each.
  const std::int64_t t = s.tokens();
  const std::int64_t dy = t * (512 + 1024 + 512 + 4096);
  const std::int64_t x_t = t * (512 + 512 + 512 + 2048);
  const std::int64_t shared = t * 2048 + 2 * 512 * 4096;
  // Less the gate/up gradient's bf16 buffer, kept as its codes only, and
  // the 8 layers' SwiGLU outputs, kept as the down projection's x^T codes
  // (one more copy of them for each layer past the first).
  ASSERT_TRUE(all.fp8.swiglu_grad_codes_only);
  ASSERT_TRUE(all.fp8.swiglu_keeps_codes);
  const std::int64_t d_gate_up = t * 4096 * 2;
  const std::int64_t hidden = 8 * t * 2048 * 2 - 7 * t * 2048;
  EXPECT_GE(a.bytes - b.bytes, 2 * dy + x_t + shared - d_gate_up - hidden);
  // Every buffer is listed, and they tile the arena.
  EXPECT_EQ(covered_bytes(a.buffers()), a.bytes);
}

// A data-parallel run keeps delayed scaling (its ranks reduce their amaxes
// after each pass, Model::reduce_fp8_amaxes) and chooses its GEMMs as one
// process does.
TEST(Fp8Plan, DataParallelRunsKeepDelayedScaling) {
  const ModelConfig cfg = one_b();
  const BatchShape shape{8, 1024};
  PlanRequest r = fp8_request();
  const StepPlan one = resolve_plan(r, fp8_caps(), cfg, shape);
  r.data_parallel = true;
  const StepPlan dp = resolve_plan(r, fp8_caps(), cfg, shape);
  EXPECT_EQ(dp.fp8.scaling, Fp8Scaling::Delayed);
  EXPECT_FALSE(has_fallback(dp, "fp8_scaling"));
  EXPECT_EQ(dp.fp8.use, one.fp8.use);
  r.fp8_scaling = Fp8Scaling::Current;
  EXPECT_EQ(resolve_plan(r, fp8_caps(), cfg, shape).fp8.scaling, Fp8Scaling::Current);
}

// Under delayed scaling the SwiGLU kernel (and the backward's recomputed
// norms) write the FP8 codes their FP8 readers take (the down projection's
// input, the gate/up gradient; the QKV and gate/up inputs' transposes): the
// plan says so, takes the SwiGLU kernel for it where v4 has the SwiGLU in
// the GEMM's epilogue, and counts those casts as the bytes they write.
TEST(Fp8Plan, TheSwigluKernelWritesItsCodesUnderDelayedScaling) {
  const ModelConfig cfg = one_b();
  const BatchShape shape{8, 1024};
  PlanRequest r = fp8_request();
  const StepPlan delayed = resolve_plan(r, fp8_caps(), cfg, shape);
  EXPECT_TRUE(delayed.fp8.swiglu_casts);
  EXPECT_TRUE(delayed.fp8.norm_casts) << "1 B recomputes its norms in the backward";
  EXPECT_EQ(delayed.ops.swiglu, SwigluImpl::Fused);
  EXPECT_NE(delayed.fp8.describe().find("SwiGLU kernel writes"), std::string::npos);

  r.fp8_scaling = Fp8Scaling::Current;
  const StepPlan current = resolve_plan(r, fp8_caps(), cfg, shape);
  EXPECT_FALSE(current.fp8.swiglu_casts) << "current scaling needs the amax before the first code";
  EXPECT_FALSE(current.fp8.norm_casts);
  r.fp8_scaling = Fp8Scaling::Delayed;
  r.ops.swiglu = SwigluImpl::Separate;
  EXPECT_FALSE(resolve_plan(r, fp8_caps(), cfg, shape).fp8.swiglu_casts)
      << "silu then mul: no one kernel computes the result";

  const Fp8Linears cast = choose_fp8_linears(cfg, shape, Fp8Choice::All, Fp8Scaling::Delayed);
  const Fp8Linears written =
      choose_fp8_linears(cfg, shape, Fp8Choice::All, Fp8Scaling::Delayed, Fp8Producers{true});
  const auto at = [](const Fp8Linears& f, LinearKind k) {
    return f.chosen_ms[static_cast<int>(k)];
  };
  EXPECT_LT(at(written, LinearKind::Down), at(cast, LinearKind::Down));
  EXPECT_LT(at(written, LinearKind::GateUp), at(cast, LinearKind::GateUp));
  EXPECT_EQ(at(written, LinearKind::Qkv), at(cast, LinearKind::Qkv));
  EXPECT_FALSE(
      choose_fp8_linears(cfg, shape, Fp8Choice::All, Fp8Scaling::Current, Fp8Producers{true})
          .swiglu_casts);
}

// The forward's norms writing the QKV and gate/up inputs' codes (v4's
// norms are kernels of their own) and the recomputed norms their
// transposes are counted as the bytes they write: at B32 S1024 that puts
// the QKV forward in FP8, where a cast of its own lost.
TEST(Fp8Plan, TheNormsWritingTheirCodesCountInTheChoice) {
  const ModelConfig cfg = workshop();
  const BatchShape shape{32, 1024};
  const auto at = [](const Fp8Linears& f, LinearKind k) {
    return f.chosen_ms[static_cast<int>(k)];
  };
  const Fp8Linears cast = choose_fp8_linears(cfg, shape, Fp8Choice::All, Fp8Scaling::Delayed);
  Fp8Producers norms;
  norms.forward_norms = true;
  const Fp8Linears forward =
      choose_fp8_linears(cfg, shape, Fp8Choice::All, Fp8Scaling::Delayed, norms);
  norms.recomputed_norms = true;
  const Fp8Linears both =
      choose_fp8_linears(cfg, shape, Fp8Choice::All, Fp8Scaling::Delayed, norms);
  for (const LinearKind k : {LinearKind::Qkv, LinearKind::GateUp}) {
    EXPECT_LT(at(forward, k), at(cast, k)) << linear_name(k);
    EXPECT_LT(at(both, k), at(forward, k)) << linear_name(k);
  }
  EXPECT_EQ(at(both, LinearKind::OutProj), at(cast, LinearKind::OutProj))
      << "the attention output is cast by a pass of its own";
  EXPECT_FALSE(choose_fp8_linears(cfg, shape).at(LinearKind::Qkv, LinearPass::Forward));
  const StepPlan p = resolve_plan(fp8_request(), fp8_caps(), cfg, shape);
  ASSERT_EQ(p.ops.epilogue, GemmEpilogue::Residual);
  EXPECT_TRUE(p.fp8.at(LinearKind::Qkv, LinearPass::Forward));
  EXPECT_TRUE(p.fp8.norm_casts);
}

// A single process's FP8 weights are cast from the fp32 master, and the
// linears whose forward and data gradient both run in FP8 keep no bf16
// copy: at 1 B every linear, 2 bytes a weight of the 1 B less memory
// (Model::estimate_memory's parameters). Under data parallel ZeRO-1
// gathers the bf16 copies, so every weight keeps one.
TEST(Fp8Plan, TheAllFp8LinearsKeepNoBf16CopyOfTheirWeights) {
  const ModelConfig cfg = one_b();
  const BatchShape shape{8, 1024};
  PlanRequest r = fp8_request(Fp8Choice::All);
  const StepPlan one = resolve_plan(r, fp8_caps(), cfg, shape);
  EXPECT_TRUE(one.fp8.master_weights);
  EXPECT_NE(one.fp8.describe().find("cast from the fp32 master"), std::string::npos);
  EXPECT_TRUE(plan_json(one)["fp8_master_weights"].get<bool>());
  for (int k = 0; k < kLinearKinds; ++k) {
    EXPECT_FALSE(one.fp8.keeps_bf16_weight(static_cast<LinearKind>(k))) << k;
  }
  const ParamLayout layout(cfg);
  std::int64_t linear_elements = 0;
  for (const ParamSlot& s : layout.slots()) {
    if (!s.is_norm && s.name != layout.embedding().name) linear_elements += s.numel();
  }
  r.data_parallel = true;
  const StepPlan dp = resolve_plan(r, fp8_caps(), cfg, shape);
  EXPECT_FALSE(dp.fp8.master_weights);
  EXPECT_TRUE(dp.fp8.keeps_bf16_weight(LinearKind::Qkv));
  EXPECT_EQ(Model::estimate_memory(cfg, shape, dp).parameters -
                Model::estimate_memory(cfg, shape, one).parameters,
            2 * linear_elements);

  Fp8Linears forward_only = one.fp8;
  forward_only.use[static_cast<int>(LinearKind::Down)][static_cast<int>(LinearPass::Dgrad)] = false;
  EXPECT_TRUE(forward_only.keeps_bf16_weight(LinearKind::Down)) << "its data gradient reads bf16";
  EXPECT_FALSE(forward_only.keeps_bf16_weight(LinearKind::Qkv));
}

// On CUDA, where the SwiGLU backward's 64 x 64 tiles fit [tokens, F] and
// both gate/up backward GEMMs are FP8, the gate/up gradient is kept only
// as FP8 codes: the arena holds no bf16 buffer for it ([8192, 16384] bf16
// at 1 B). Not on the CPU, not where the tiles do not fit.
TEST(Fp8Plan, TheGateUpGradientIsKeptAsCodesWhereTheTilesFit) {
  const ModelConfig cfg = one_b();
  const BatchShape shape{8, 1024};
  const StepPlan p = resolve_plan(fp8_request(), fp8_caps(), cfg, shape);
  EXPECT_TRUE(p.fp8.swiglu_grad_codes_only);
  EXPECT_NE(p.fp8.describe().find("FP8 codes only"), std::string::npos);
  EXPECT_FALSE(ActivationPlan(cfg, shape, p).d_gate_up.used());
  // The whole buffer, with the scratch apart from the logits (over them, the
  // logits' bytes would hide part of it).
  StepPlan codes = p;
  codes.scratch_over_logits = false;
  StepPlan kept = codes;
  kept.fp8.swiglu_grad_codes_only = false;
  EXPECT_EQ(Model::estimate_memory(cfg, shape, kept).activations -
                Model::estimate_memory(cfg, shape, codes).activations,
            std::int64_t{8192} * 16384 * 2);
  const StepPlan odd = resolve_plan(fp8_request(), fp8_caps(), cfg, BatchShape{8, 1026});
  ASSERT_TRUE(odd.fp8.swiglu_casts && odd.fp8.at(LinearKind::GateUp, LinearPass::Wgrad));
  EXPECT_FALSE(odd.fp8.swiglu_grad_codes_only) << "8208 tokens: not whole tiles";
  DeviceCaps cpu = fp8_caps();
  cpu.kind = DeviceKind::Cpu;
  EXPECT_FALSE(resolve_plan(fp8_request(), cpu, cfg, shape).fp8.swiglu_grad_codes_only);
}

// On CUDA, where the forward's SwiGLU writes both copies of the down
// projection's input from whole tiles and that projection's forward and
// weight gradient are FP8, a stored SwiGLU output is kept only as the
// weight gradient's transposed codes: [F, tokens] bytes a layer for
// [tokens, F] bf16. Not where the backward recomputes it, not where the
// tiles do not fit, not on the CPU.
TEST(Fp8Plan, TheSwigluOutputIsKeptAsCodesWhereTheTilesFit) {
  const ModelConfig cfg = workshop();
  const BatchShape shape{32, 1024};
  const StepPlan p = resolve_plan(fp8_request(), fp8_caps(), cfg, shape);
  ASSERT_FALSE(recomputes_swiglu(p.ops.activations)) << "auto stores the SwiGLU output here";
  ASSERT_TRUE(p.fp8.at(LinearKind::Down, LinearPass::Wgrad))
      << "the transposed codes written with the forward's cost no pass of their own";
  EXPECT_TRUE(p.fp8.swiglu_keeps_codes);
  EXPECT_NE(p.fp8.describe().find("SwiGLU output is kept as FP8 codes"), std::string::npos);
  EXPECT_TRUE(plan_json(p)["fp8_swiglu_keeps_codes"].get<bool>());
  EXPECT_FALSE(ActivationPlan(cfg, shape, p).layers[0].ffn_hidden.used());
  StepPlan kept = p;
  kept.fp8.swiglu_keeps_codes = false;
  const std::int64_t elems = shape.tokens() * cfg.ffn_dim;
  EXPECT_EQ(Model::estimate_memory(cfg, shape, kept).activations -
                Model::estimate_memory(cfg, shape, p).activations,
            8 * elems * 2 - 7 * elems);

  PlanRequest recompute = fp8_request();
  recompute.ops.activations = ActivationsImpl::RecomputeNormsSwiglu;
  EXPECT_FALSE(resolve_plan(recompute, fp8_caps(), cfg, shape).fp8.swiglu_keeps_codes);
  const BatchShape odd{24, 1026};
  const StepPlan not_tiles = resolve_plan(fp8_request(), fp8_caps(), cfg, odd);
  ASSERT_TRUE(not_tiles.fp8.at(LinearKind::Down, LinearPass::Wgrad));
  EXPECT_FALSE(not_tiles.fp8.swiglu_keeps_codes) << "24 624 tokens: not whole tiles";
  DeviceCaps cpu = fp8_caps();
  cpu.kind = DeviceKind::Cpu;
  EXPECT_FALSE(resolve_plan(fp8_request(), cpu, cfg, shape).fp8.swiglu_keeps_codes);
}

}  // namespace
}  // namespace tinyllama
