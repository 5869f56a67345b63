// The cost model derived from the recorded op sequence against the one
// written by hand before it (legacy_cost_model.cc), op for op: the same
// paths, kinds, GEMM counts, FLOPs and bytes at every level and every single
// change of one, in fp32, bf16 and fp16, at four shapes, with and without
// the update recipe's accumulation and gradient norm. The one intended
// difference: AdamW's nominal FLOPs now count every element a sweep passes
// (the slots' alignment and the embedding's padded rows too), as its bytes
// always did; and the GEMM launches an op counts are every micro-batch's
// and every loss chunk's.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "model/param_layout.h"
#include "prof/cost_model.h"
#include "prof/legacy_cost_model.h"

namespace tinyllama::prof {
namespace {

struct Shape {
  const char* name;
  ModelConfig cfg;
  BatchShape batch;
  std::int64_t loss_chunk_rows;
};

ModelConfig config(int vocab, int hidden, int layers, int heads, int kv, int ffn) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_dim = hidden;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv;
  c.ffn_dim = ffn;
  return c;
}

const Shape kShapes[] = {
    {"odd_vocab_gqa2", config(301, 128, 2, 4, 2, 384), {3, 40}, 0},
    {"hd128_mqa_chunks", config(5000, 256, 1, 2, 1, 512), {2, 64}, 48},
    {"mha_hd32", config(97, 96, 3, 3, 3, 256), {1, 33}, 0},
    {"gqa4_long", config(1000, 512, 1, 8, 2, 1024), {2, 128}, 100},
};

// A CUDA-like device where every choice runs: graphs with branches (the
// per-layer sweeps), the Hopper kernels (the SwiGLU GEMM), PDL.
DeviceCaps every_choice_runs() {
  DeviceCaps caps;
  caps.kind = DeviceKind::Cuda;
  caps.graphs = caps.parallel_branches = true;
  caps.no_programmatic_launch = "";
  caps.no_hopper_kernels = "";
  caps.sm_count = 132;
  return caps;
}

// AdamW's FLOPs over the padding the sweeps pass (the slots' alignment and
// the embedding's padded rows): what the recorded sweeps count and the hand
// model did not.
std::int64_t padding_flops(const ModelConfig& cfg) {
  const ParamLayout layout(cfg);
  std::int64_t params = 0;
  for (const ParamSlot& s : layout.slots()) params += s.numel();
  return kAdamWFlops * (layout.total() - params);
}

void expect_agreement(const StepCost& derived, const StepCost& hand, std::int64_t adamw_slack) {
  std::map<std::string, const OpCost*> by_path;
  for (const OpCost& o : derived.ops) by_path[o.path] = &o;
  EXPECT_EQ(derived.ops.size(), hand.ops.size());
  EXPECT_EQ(derived.tokens, hand.tokens);
  for (const OpCost& h : hand.ops) {
    SCOPED_TRACE(h.path);
    const auto it = by_path.find(h.path);
    if (it == by_path.end()) {
      ADD_FAILURE() << "the recorded sequence has no op " << h.path;
      continue;
    }
    const OpCost& d = *it->second;
    EXPECT_EQ(d.phase, h.phase);
    EXPECT_EQ(d.layer, h.layer);
    EXPECT_EQ(d.op, h.op);
    EXPECT_EQ(op_kind_name(d.kind), std::string(op_kind_name(h.kind)));
    // The hand model counted one micro-batch's and one chunk's launches;
    // the recorded step counts every launch it makes.
    if (h.gemm_calls > 0) {
      EXPECT_EQ(d.gemm_calls % h.gemm_calls, 0);
      EXPECT_GE(d.gemm_calls, h.gemm_calls);
    } else {
      EXPECT_EQ(d.gemm_calls, 0);
    }
    EXPECT_EQ(d.bytes, h.bytes);
    if (h.kind == OpKind::Optimizer) {
      EXPECT_GE(d.flops, h.flops);
      EXPECT_LE(d.flops - h.flops, adamw_slack);
    } else {
      EXPECT_EQ(d.flops, h.flops);
    }
  }
}

std::vector<std::pair<std::string, OpChoices>> every_variant() {
  std::vector<std::pair<std::string, OpChoices>> out;
  for (const std::string& level : implemented_levels()) {
    out.push_back({level, level_preset(level)});
    int i = 0;
    for (const OpChoices& ops : single_changes(level_preset(level))) {
      out.push_back({level + " change " + std::to_string(i++), ops});
    }
  }
  return out;
}

TEST(CostModelAgreement, TheRecordedSequenceCostsWhatTheHandWrittenModelDid) {
  for (const Shape& shape : kShapes) {
    for (const Precision p :
         {Precision::fp32(), Precision::amp(DType::BF16), Precision::amp(DType::F16)}) {
      for (const auto& [name, ops] : every_variant()) {
        for (int recipe = 0; recipe < 3; ++recipe) {
          SCOPED_TRACE(std::string(shape.name) + " " + precision_name(p) + " " + name + " recipe " +
                       std::to_string(recipe));
          PlanRequest request;
          request.level = "custom";
          request.ops = ops;
          if (request.ops.attention == AttentionImpl::Auto) {
            request.ops.attention = AttentionImpl::Flash;
          }
          request.precision = p;
          request.loss_chunk_rows = shape.loss_chunk_rows;
          if (recipe == 1) request.update.accumulation = 3;
          if (recipe == 2) request.update.clip_norm = 1.0;
          const StepPlan plan = resolve_plan(request, every_choice_runs(), shape.cfg, shape.batch);
          expect_agreement(step_cost(shape.cfg, shape.batch, plan),
                           legacy::hand_step_cost(shape.cfg, shape.batch, plan),
                           padding_flops(shape.cfg));
        }
      }
    }
  }
}

}  // namespace
}  // namespace tinyllama::prof
