#pragma once
// The one source of every FLOPs, bytes, MFU and roofline figure (DESIGN §3):
// what each op of one training step must compute and move, from the shapes
// alone. The op list is the model passes' own: they run once on the
// access-trace backend (prof/access_trace.h), which computes nothing and
// charges each call its cost (prof/call_cost.h), so the ops are the marked
// ops of the passes one for one (same path names: "forward/layer3/qkv_gemm")
// and measured op times join with these counts by name. Nothing here lists
// the step's ops a second time.
//
// Conventions (docs/PROFILING.md repeats them for readers of the output):
//  * A GEMM of an [M, K] by [K, N] product is 2·M·N·K FLOPs. Every linear
//    layer has a forward GEMM and two backward GEMMs (dgrad: the input's
//    gradient, wgrad: the weight's gradient), each as many FLOPs as the
//    forward. The tied embedding counts once, as the LM head's GEMM; the
//    embedding lookup is a gather (bytes, no FLOPs).
//  * Causal attention counts the causal half of the S x S square (the
//    literature's S²/2, ignoring the diagonal's S/2): forward QKᵀ and PV are
//    2 · 2·B·H·S²·hd · 1/2; the backward's four products (dV, dP, dQ, dK)
//    twice that, so training is 3 x forward = 6·B·H·S²·hd per layer. Work a
//    kernel repeats (flash attention recomputing QKᵀ) or wastes (a
//    materialised kernel computing the masked half) is not model work.
//  * Model FLOPs (the MFU numerator) are GEMMs plus attention products, so
//    for one step they equal 6·N·T + 6·L·B·H·S²·hd exactly, where T = B·S
//    tokens and N = the parameters that take part in a matrix product: every
//    parameter except the RMSNorm weights (the tied embedding once).
//  * Other ops get a nominal FLOP count per element (documented at each op);
//    it places them on the roofline but is not model work.
//  * Minimal bytes: every tensor the op reads or writes in memory, once,
//    in the dtype it is stored in, as this level runs the op (an unfused
//    level's three Q/K/V GEMMs read their input three times and accumulate
//    dgrad into one buffer). Scratch an implementation writes and rereads is
//    not counted; saved tensors (materialised attention's probabilities) are.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/step_plan.h"
#include "prof/call_cost.h"

namespace tinyllama::prof {

struct OpCost {
  std::string path;   // "forward/layer3/qkv_gemm", "optimizer/adamw"
  std::string phase;  // "forward", "backward", "optimizer"
  int layer = -1;     // -1 outside the blocks
  std::string op;     // "qkv_gemm": the op without phase and layer
  OpKind kind = OpKind::Elementwise;
  std::int64_t flops = 0;
  std::int64_t bytes = 0;        // read + written
  std::int64_t write_bytes = 0;  // of bytes, written (CallCost's)
  // GEMM launches the op makes in a step: 3 for unfused QKV, once per
  // micro-batch and per loss chunk.
  int gemm_calls = 0;

  // "forward/qkv_gemm": the op summed over layers, for per-op tables.
  std::string kind_key() const { return phase + "/" + op; }
  std::int64_t read_bytes() const { return bytes - write_bytes; }
  bool model_work() const { return kind == OpKind::Gemm || kind == OpKind::Attention; }
};

struct StepCost {
  std::vector<OpCost> ops;  // in the order the passes run them
  std::int64_t tokens = 0;  // T = B·S

  std::int64_t model_flops() const;  // GEMMs + attention products
  std::int64_t gemm_flops() const;
  std::int64_t attention_flops() const;
  std::int64_t total_flops() const;  // including nominal elementwise FLOPs
  std::int64_t total_bytes() const;
  const OpCost* find(const std::string& path) const;  // null if absent
};

// Parameters taking part in matrix products: all but the RMSNorm weights
// (the N of 6·N·T).
std::int64_t matmul_parameters(const ModelConfig& cfg);

// The attention term of a training step: 6·L·B·H·S²·hd (causal half).
std::int64_t attention_training_flops(const ModelConfig& cfg, BatchShape shape);

// Every op of one training step (forward, backward, optimizer) as the plan
// runs it: the passes' calls, each micro-batch's summed into its op. Loss
// scaling adds the overflow scan of the gradients, AMP with a per-tensor
// optimizer the refresh of the low-precision weight copy, the update recipe
// the accumulation and the gradient norm -- because the passes run them.
// One rank's step: the exchanges between ranks are not counted.
StepCost step_cost(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan);

}  // namespace tinyllama::prof
