// The memory timeline of a step under --grad-buffers ring: the step traces
// as a whole step does (the layers swept in the backward pass), its
// activations live as under full, and what it holds all along counts the
// ring's gradient bytes.
#include <gtest/gtest.h>

#include "model/param_layout.h"
#include "model/test_plans.h"
#include "prof/memory_timeline.h"

namespace tinyllama::prof {
namespace {

TEST(GradRingTimeline, CountsTheRingAndLeavesTheActivationsAsTheyAre) {
  ModelConfig cfg;
  cfg.vocab_size = 29;
  cfg.hidden_dim = 16;
  cfg.num_layers = 5;
  cfg.num_heads = 4;
  cfg.num_kv_heads = 2;
  cfg.ffn_dim = 24;
  const BatchShape shape{2, 8};
  OpChoices ring_ops = level_preset("v3");
  ring_ops.grad_buffers = GradBuffers::Ring;
  const StepPlan full = graph_plan(level_preset("v3"), Precision::amp(DType::BF16), cfg, shape);
  const StepPlan ring =
      graph_plan(ring_ops, Precision::amp(DType::BF16), cfg, shape, /*keep_grad_ring=*/true);
  ASSERT_EQ(ring.ops.grad_buffers, GradBuffers::Ring);

  const MemoryTimeline a = trace_memory_timeline(cfg, shape, full);
  const MemoryTimeline b = trace_memory_timeline(cfg, shape, ring);
  const ParamLayout layout(cfg);
  EXPECT_EQ(a.allocated.gradients - b.allocated.gradients, 3 * layout.layer_span(0).size() * 4);
  EXPECT_EQ(a.allocated.activations, b.allocated.activations);
  EXPECT_EQ(a.ops.size(), b.ops.size());
  EXPECT_EQ(a.peak_live_bytes, b.peak_live_bytes);
  EXPECT_GT(b.peak_live_bytes, 0);
}

}  // namespace
}  // namespace tinyllama::prof
