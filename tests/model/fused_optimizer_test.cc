// The fused optimizer sweep (OptimizerImpl::Fused, FusedPerLayer) against the
// per-tensor AdamW calls followed by the compute-copy refresh: bit-identical
// parameters, moments and compute copy, step after step. The CPU backend's
// fused op is the composition of its primitives, so what these tests pin
// down is the model's wiring (whole flat block, padding included, the copy
// written in the same op) and that padding stays exactly zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/rng.h"
#include "cpu/cpu_backend.h"
#include "model/init.h"
#include "model/model.h"
#include "model/test_plans.h"
#include "random_batch.h"
#include "same_bits.h"
#include "whole_step.h"

namespace tinyllama {
namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.vocab_size = 13;
  c.hidden_dim = 8;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.ffn_dim = 10;  // odd-sized slots, so the layout has padding between them
  return c;
}

struct Snapshot {
  std::vector<double> params, m, v;
};

// Three full training steps at `level`; the state after each. whole_steps:
// as StepRunner runs them (stage_step, then the passes, each layer updated
// during the backward pass where the level does that); otherwise backward()
// then optimizer_step().
std::vector<Snapshot> train(const OpChoices& ops, Precision precision, bool whole_steps = false) {
  const ModelConfig cfg = tiny_config();
  const BatchShape shape{2, 5};
  CpuBackend backend;
  Model model(cfg, shape, graph_plan(ops, precision, cfg, shape), backend);
  model.set_params(initial_weights(model.layout(), 11));
  std::vector<Snapshot> out;
  AdamWHyper hp;
  hp.lr = 1e-2f;  // large enough that every step visibly moves the weights
  for (int step = 1; step <= 3; ++step) {
    model.set_batch(random_rows(shape.batch, shape.seq, cfg.vocab_size, 100 + step));
    hp.step = step;
    if (whole_steps) {
      run_whole_step(model, hp);
    } else {
      model.forward();
      model.backward(1.0f, false);
      model.optimizer_step(hp);
    }
    out.push_back({model.params(), model.adam_m(), model.adam_v()});
  }
  return out;
}

class FusedOptimizer : public ::testing::TestWithParam<DType> {};

TEST_P(FusedOptimizer, ModelStepsAreBitIdenticalToPerTensorPath) {
  const Precision precision = GetParam() == DType::F64 ? Precision::fp64() : Precision::fp32();
  OpChoices fused = level_preset("v2");
  fused.optimizer = OptimizerImpl::Fused;
  OpChoices per_tensor = fused;
  per_tensor.optimizer = OptimizerImpl::PerTensor;
  const std::vector<Snapshot> a = train(fused, precision);
  const std::vector<Snapshot> b = train(per_tensor, precision);
  const ParamLayout layout(tiny_config());
  for (std::size_t s = 0; s < a.size(); ++s) {
    SCOPED_TRACE("after step " + std::to_string(s + 1));
    EXPECT_TRUE(same_bits(a[s].params, b[s].params)) << "parameters differ";
    EXPECT_TRUE(same_bits(a[s].m, b[s].m)) << "first moments differ";
    EXPECT_TRUE(same_bits(a[s].v, b[s].v)) << "second moments differ";
    // The sweep also ran over the padding between slots and the
    // embedding's rows past the vocabulary (13 of padded_vocab() 128, which
    // the LM-head GEMMs read and write): still exactly zero, so their
    // gradients were zero too (m would have moved).
    std::vector<bool> used(static_cast<std::size_t>(layout.total()), false);
    for (const ParamSlot& slot : layout.slots()) {
      for (std::int64_t i = 0; i < slot.numel(); ++i) used[slot.offset + i] = true;
    }
    for (std::size_t i = 0; i < used.size(); ++i) {
      if (used[i]) continue;
      ASSERT_EQ(a[s].params[i], 0.0) << "padding element " << i;
      ASSERT_EQ(a[s].m[i], 0.0) << "padding element " << i;
      ASSERT_EQ(a[s].v[i], 0.0) << "padding element " << i;
    }
  }
  // Not vacuous: the weights moved.
  EXPECT_FALSE(same_bits(a.front().params, a.back().params));
}

// v2 updates each layer during the backward pass and sweeps the rest
// after it: the same bits as one sweep after the whole backward pass.
TEST_P(FusedOptimizer, LayerUpdatesDuringBackwardAreBitIdenticalToOneSweep) {
  const Precision precision = GetParam() == DType::F64 ? Precision::fp64() : Precision::fp32();
  const OpChoices v2 = level_preset("v2");
  ASSERT_TRUE(graph_plan(v2, precision, tiny_config(), {2, 5}).updates_layers_in_backward());
  const std::vector<Snapshot> split = train(v2, precision, /*whole_steps=*/true);
  const std::vector<Snapshot> one = train(v2, precision, /*whole_steps=*/false);
  for (std::size_t s = 0; s < split.size(); ++s) {
    SCOPED_TRACE("after step " + std::to_string(s + 1));
    EXPECT_TRUE(same_bits(split[s].params, one[s].params)) << "parameters differ";
    EXPECT_TRUE(same_bits(split[s].m, one[s].m)) << "first moments differ";
    EXPECT_TRUE(same_bits(split[s].v, one[s].v)) << "second moments differ";
  }
  EXPECT_FALSE(same_bits(split.front().params, split.back().params));
}

INSTANTIATE_TEST_SUITE_P(Master, FusedOptimizer, ::testing::Values(DType::F32, DType::F64),
                         [](const auto& info) {
                           return info.param == DType::F32 ? std::string("F32")
                                                           : std::string("F64");
                         });

// The layers' spans and the rest tile the flat block exactly once, in
// order, and every slot lies wholly inside one of them.
TEST(ParamLayoutSpans, LayersAndTheRestTileTheBlock) {
  const ModelConfig cfg = tiny_config();
  const ParamLayout layout(cfg);
  std::vector<ParamSpan> spans = layout.non_layer_spans();
  for (int l = 0; l < cfg.num_layers; ++l) spans.push_back(layout.layer_span(l));
  std::sort(spans.begin(), spans.end(),
            [](const ParamSpan& a, const ParamSpan& b) { return a.begin < b.begin; });
  std::int64_t at = 0;
  for (const ParamSpan& span : spans) {
    EXPECT_EQ(span.begin, at);
    EXPECT_GT(span.size(), 0);
    at = span.end;
  }
  EXPECT_EQ(at, layout.total());
  ASSERT_EQ(layout.non_layer_spans().size(), 2U);  // the embedding, the final norm
  for (const ParamSlot& slot : layout.slots()) {
    const int inside = static_cast<int>(std::count_if(spans.begin(), spans.end(), [&](auto& s) {
      return slot.offset >= s.begin && slot.offset + slot.numel() <= s.end;
    }));
    EXPECT_EQ(inside, 1) << slot.name;
  }
  const ParamSlot& wdown1 = layout.layer(1, &LayerSlots::wdown);
  EXPECT_GE(layout.layer_span(1).end, wdown1.offset + wdown1.numel());
  EXPECT_LE(layout.layer_span(1).begin, layout.layer(1, &LayerSlots::attn_norm).offset);
}

// The backend op itself with a compute copy (fp64 master, fp32 copy: the
// CPU's only mixed pair): one call over the flat block gives the per-slot
// adamw calls followed by one convert, bit for bit, over three steps; a set
// skip flag leaves everything as it was.
TEST(FusedOptimizerOp, WholeBlockWithCopyMatchesPerSlotThenConvert) {
  const ParamLayout layout(tiny_config());
  const std::int64_t n = layout.total();
  const auto un = static_cast<std::size_t>(n);
  Rng rng(5);
  std::vector<double> p0(un, 0.0);
  for (const ParamSlot& slot : layout.slots()) {
    for (std::int64_t i = 0; i < slot.numel(); ++i) p0[slot.offset + i] = 0.1 * rng.normal();
  }
  CpuBackend backend;
  struct State {
    std::vector<double> p, g, m, v;
    std::vector<float> copy;
  };
  State fused{p0, std::vector<double>(un, 0.0), std::vector<double>(un, 0.0),
              std::vector<double>(un, 0.0), std::vector<float>(un, 0.f)};
  State split = fused;
  auto mat = [&](std::vector<double>& x) { return Mat(x.data(), DType::F64, 1, n); };
  auto copy_mat = [&](std::vector<float>& x) { return Mat(x.data(), DType::F32, 1, n); };

  AdamWHyper hp;
  hp.lr = 1e-2f;
  for (int step = 1; step <= 3; ++step) {
    hp.step = step;
    for (const ParamSlot& slot : layout.slots()) {  // padding gradients stay zero
      for (std::int64_t i = 0; i < slot.numel(); ++i) {
        fused.g[slot.offset + i] = split.g[slot.offset + i] = rng.normal();
      }
    }
    backend.adamw_fused(mat(fused.p), mat(fused.g), mat(fused.m), mat(fused.v),
                        copy_mat(fused.copy), hp);
    for (const ParamSlot& slot : layout.slots()) {
      auto at = [&](std::vector<double>& x) {
        return Mat(x.data() + slot.offset, DType::F64, 1, slot.numel());
      };
      backend.adamw(at(split.p), at(split.g), at(split.m), at(split.v), hp);
    }
    backend.convert(copy_mat(split.copy), mat(split.p));
    SCOPED_TRACE("step " + std::to_string(step));
    EXPECT_TRUE(same_bits(fused.p, split.p));
    EXPECT_TRUE(same_bits(fused.m, split.m));
    EXPECT_TRUE(same_bits(fused.v, split.v));
    EXPECT_EQ(std::memcmp(fused.copy.data(), split.copy.data(), un * sizeof(float)), 0);
    for (std::size_t i = 0; i < un; ++i) ASSERT_TRUE(std::isfinite(fused.p[i])) << i;
  }

  const State before = fused;
  const std::int32_t skip = 1;
  hp.skip_flag = &skip;
  hp.step = 4;
  backend.adamw_fused(mat(fused.p), mat(fused.g), mat(fused.m), mat(fused.v), copy_mat(fused.copy),
                      hp);
  EXPECT_TRUE(same_bits(fused.p, before.p));
  EXPECT_TRUE(same_bits(fused.m, before.m));
  EXPECT_TRUE(same_bits(fused.v, before.v));
  EXPECT_EQ(std::memcmp(fused.copy.data(), before.copy.data(), un * sizeof(float)), 0);
}

}  // namespace
}  // namespace tinyllama
