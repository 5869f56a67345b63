// The memory timeline: liveness from hand-made accesses, then the traced
// step of real plans checked against what the passes must do (every buffer
// used, saved tensors live from their forward op to their backward op,
// backward scratch never live in the forward pass), the JSON's keys and
// sums, and the plot's structure.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/test_plans.h"
#include "prof/memory_timeline.h"
#include "prof/memory_timeline_json.h"
#include "prof/memory_timeline_svg.h"

namespace tinyllama::prof {
namespace {

// Three fp32 buffers of 4 rows x 2 columns (32 bytes, one 256-byte slot each).
std::vector<ActivationBuffer> three_buffers() {
  std::vector<ActivationBuffer> out;
  for (int i = 0; i < 3; ++i) {
    Slot s{i * 256, 4, 2, DType::F32, 2};
    out.push_back({std::string(1, static_cast<char>('a' + i)), "qkv", s, 256});
  }
  return out;
}

MemoryAccess access(const char* arena, const ActivationBuffer& b, bool write,
                    std::int64_t first_row = 0, std::int64_t rows = 4) {
  return {arena + b.slot.offset + first_row * 8, rows, 8, 8, write};
}

TEST(MemoryTimeline, LivenessFollowsWritesAndLastReads) {
  static char arena[768];
  const std::vector<ActivationBuffer> bufs = three_buffers();
  const ActivationBuffer& a = bufs[0];
  const ActivationBuffer& b = bufs[1];
  const ActivationBuffer& c = bufs[2];
  std::vector<TracedOp> ops{
      {"forward/w_a", {access(arena, a, true)}, {}},                              // 0
      {"forward/a_to_b", {access(arena, a, false), access(arena, b, true)}, {}},  // 1
      {"forward/w_c", {access(arena, c, true)}, {}},                              // 2: never read
      {"backward/r_b", {access(arena, b, false)}, {}},                            // 3
      {"backward/w_a_half", {access(arena, a, true, 0, 2)}, {}},                  // 4: partial
      {"backward/r_a", {access(arena, a, false)}, {}},                            // 5
      {"backward/w_b_full", {access(arena, b, true)}, {}},  // 6: full, read at 7
      {"optimizer/r_b", {access(arena, b, false)}, {}},     // 7
  };
  const MemoryTimeline tl = analyse_accesses(ops, arena, bufs, {});
  using Ranges = std::vector<std::pair<int, int>>;
  // a: read at 5 after only half of it was rewritten at 4, so what op 0 wrote
  // is still needed through op 5.
  EXPECT_EQ(tl.buffers[0].lifetimes, (Ranges{{0, 5}}));
  // b: dead between its last read (3) and the full rewrite (6).
  EXPECT_EQ(tl.buffers[1].lifetimes, (Ranges{{1, 3}, {6, 7}}));
  // c: live only while written.
  EXPECT_EQ(tl.buffers[2].lifetimes, (Ranges{{2, 2}}));
  ASSERT_EQ(tl.ops.size(), 8u);
  EXPECT_EQ(tl.ops[2].live_bytes, 3 * 256);
  EXPECT_EQ(tl.ops[6].live_bytes, 256);  // only b
  EXPECT_EQ(tl.ops[6].phase, "backward");
  EXPECT_EQ(tl.peak_op, 2);
  EXPECT_EQ(tl.peak_live_bytes, 3 * 256);
}

TEST(MemoryTimeline, ColumnBlocksTogetherMakeAFullWrite) {
  static char arena[768];
  const std::vector<ActivationBuffer> bufs = three_buffers();
  const ActivationBuffer& a = bufs[0];
  const char* base = arena + a.slot.offset;
  std::vector<TracedOp> ops{
      {"forward/w", {access(arena, a, true)}, {}},
      {"forward/r", {access(arena, a, false)}, {}},
      {"forward/idle", {access(arena, bufs[1], true)}, {}},
      // Both columns, one at a time (the separate QKV GEMMs' way).
      {"backward/w_cols", {{base, 4, 4, 8, true}, {base + 4, 4, 4, 8, true}}, {}},
      {"backward/r", {access(arena, a, false)}, {}},
  };
  const MemoryTimeline tl = analyse_accesses(ops, arena, bufs, {});
  using Ranges = std::vector<std::pair<int, int>>;
  EXPECT_EQ(tl.buffers[0].lifetimes, (Ranges{{0, 1}, {3, 4}}));
}

// Scratch laid over the logits (ActivationBuffer::over_logits): an access
// to the shared bytes is the scratch's inside a layer's backward and the
// logits' anywhere else; the bytes past the logits are the scratch's only.
TEST(MemoryTimeline, SharedBytesGoToTheScratchOnlyInsideALayersBackward) {
  static char arena[768];
  std::vector<ActivationBuffer> bufs = three_buffers();
  bufs[1].name = "logits";
  bufs[2] = {"d_qkv", "backward_scratch", Slot{256, 64, 2, DType::F32, 2}, 512, true};
  const char* shared = arena + 256;
  const char* past_logits = arena + 512;
  std::vector<TracedOp> ops{
      {"forward/lm_head_gemm", {{shared, 4, 8, 8, true}}, {}},                  // 0: the logits
      {"forward/lm_head_gemm_wgrad", {{shared, 4, 8, 8, false}}, {}},           // 1
      {"backward/layer1/swiglu", {{shared, 64, 8, 8, true}}, {}},               // 2: the scratch
      {"backward/layer0/qkv_gemm_dgrad", {{past_logits, 4, 8, 8, false}}, {}},  // 3
  };
  const MemoryTimeline tl = analyse_accesses(ops, arena, bufs, {});
  using Ranges = std::vector<std::pair<int, int>>;
  ASSERT_EQ(tl.buffers.size(), 3u);
  EXPECT_EQ(tl.arena_bytes, 768);
  EXPECT_EQ(tl.buffers[1].lifetimes, (Ranges{{0, 1}}));
  EXPECT_EQ(tl.buffers[2].lifetimes, (Ranges{{2, 3}}));
  EXPECT_EQ(tl.ops[1].live_bytes, 256);
  EXPECT_EQ(tl.ops[2].live_bytes, 512);
}

struct Traced {
  ModelConfig cfg;
  BatchShape shape{2, 8};
  StepPlan plan;
  MemoryTimeline tl;
};

Traced trace(const std::string& level, Precision precision,
             ActivationsImpl activations = ActivationsImpl::Stored) {
  Traced t;
  t.cfg.vocab_size = 50;
  t.cfg.hidden_dim = 16;
  t.cfg.num_layers = 2;
  t.cfg.num_heads = 4;
  t.cfg.num_kv_heads = 2;
  t.cfg.ffn_dim = 24;
  OpChoices ops = level_preset(level);
  ops.activations = activations;
  t.plan = plan_for_choices(ops, precision, graph_capable_cpu_caps(), t.cfg, t.shape);
  t.plan.level = level;
  t.tl = trace_memory_timeline(t.cfg, t.shape, t.plan);
  return t;
}

const TimelineBuffer& named(const MemoryTimeline& tl, const std::string& name) {
  const auto it = std::find_if(tl.buffers.begin(), tl.buffers.end(),
                               [&](const TimelineBuffer& b) { return b.name == name; });
  if (it == tl.buffers.end()) throw std::runtime_error("no buffer " + name);
  return *it;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

TEST(MemoryTimeline, TracedStepsKeepSavedTensorsFromForwardToBackward) {
  for (const char* level : {"v1", "v2", "v3"}) {
    for (const Precision p :
         {Precision::fp32(), Precision::amp(DType::BF16), Precision::amp(DType::F16)}) {
      const Traced t = trace(level, p);
      const MemoryTimeline& tl = t.tl;
      SCOPED_TRACE(std::string(level) + " " + precision_name(p));
      ASSERT_FALSE(tl.ops.empty());
      // The phases in the order StepRunner runs them.
      std::vector<std::string> phases;
      for (const TimelineOp& op : tl.ops) {
        if (phases.empty() || phases.back() != op.phase) phases.push_back(op.phase);
      }
      EXPECT_EQ(phases,
                (std::vector<std::string>{"forward", "backward", "optimizer", "loss_readback"}));
      // Every access happened inside a marked op.
      for (const TimelineOp& op : tl.ops) EXPECT_NE(op.name, "(unmarked)");
      const std::int64_t arena = ActivationPlan(t.cfg, t.shape, t.plan).bytes;
      EXPECT_EQ(tl.arena_bytes, arena);
      std::int64_t sum = 0;
      for (const TimelineBuffer& b : tl.buffers) {
        sum += b.bytes;
        EXPECT_GE(b.first_op(), 0) << b.name << " is never touched";
        const std::string first = tl.ops[static_cast<std::size_t>(b.first_op())].name;
        const std::string last = tl.ops[static_cast<std::size_t>(b.last_op())].name;
        if (starts_with(b.name, "layer")) {
          // A saved tensor: made in the forward pass, last read in the backward pass.
          EXPECT_TRUE(starts_with(first, "forward/")) << b.name << " first at " << first;
          EXPECT_TRUE(starts_with(last, "backward/")) << b.name << " last at " << last;
          EXPECT_EQ(b.lifetimes.size(), 1u) << b.name;
        }
        // Backward scratch is first written in the backward pass, but for
        // d(final norm) under the chunked loss, whose forward pass runs the
        // head's backward chunk by chunk.
        const bool chunked_head = b.name == "d_norm_out" && t.plan.ops.loss == LossImpl::Chunked;
        if (b.kind == "backward_scratch") {
          EXPECT_EQ(first.rfind(chunked_head ? "forward/lm_head_gemm_dgrad" : "backward/", 0), 0u)
              << b.name << " first at " << first;
        }
      }
      // The arena and the token ids: the activations the memory check counts
      // (the scratch over the logits shares their bytes).
      EXPECT_GT(tl.shared_bytes, 0);
      EXPECT_EQ(sum - tl.shared_bytes, tl.allocated.activations);
      // Layer 0's input is needed until layer 0's backward pass.
      const TimelineBuffer& x0 = named(tl, "layer0.residual_in");
      EXPECT_TRUE(
          starts_with(tl.ops[static_cast<std::size_t>(x0.last_op())].name, "backward/layer0/"));
      EXPECT_EQ(tl.ops[static_cast<std::size_t>(x0.first_op())].name, "forward/embedding");
      // The losses are read back after the optimizer: live to the last op.
      EXPECT_EQ(named(tl, "losses").last_op(), static_cast<int>(tl.ops.size()) - 1);
      // The peak: the sum of the buffers live there, at most the allocation.
      std::int64_t at_peak = 0;
      for (const TimelineBuffer& b : tl.buffers) at_peak += b.live_at(tl.peak_op) ? b.bytes : 0;
      EXPECT_EQ(tl.peak_live_bytes, at_peak);
      EXPECT_LE(tl.peak_live_bytes, tl.allocated.activations);
      for (const TimelineOp& op : tl.ops) EXPECT_LE(op.live_bytes, tl.peak_live_bytes);
    }
  }
}

TEST(MemoryTimeline, ChunkedLossRunsTheHeadPerChunkInTheForwardPass) {
  Traced t;
  t.cfg.vocab_size = 50;
  t.cfg.hidden_dim = 16;
  t.cfg.num_layers = 1;
  t.cfg.num_heads = 2;
  t.cfg.num_kv_heads = 2;
  t.cfg.ffn_dim = 24;
  PlanRequest req;
  req.level = "v3";
  req.ops = level_preset("v3");
  req.precision = Precision::fp32();
  req.loss_chunk_rows = 4;  // 16 tokens: four chunks
  t.plan = resolve_plan(req, graph_capable_cpu_caps(), t.cfg, t.shape);
  ASSERT_EQ(t.plan.ops.loss, LossImpl::Chunked);
  t.tl = trace_memory_timeline(t.cfg, t.shape, t.plan);
  int head_gemms = 0;
  for (const TimelineOp& op : t.tl.ops) head_gemms += op.name == "forward/lm_head_gemm" ? 1 : 0;
  EXPECT_EQ(head_gemms, 4);
  // d(final norm) is filled chunk by chunk in the forward pass and read by
  // the final norm's backward.
  const TimelineBuffer& dnf = named(t.tl, "d_norm_out");
  EXPECT_TRUE(starts_with(t.tl.ops[static_cast<std::size_t>(dnf.first_op())].name,
                          "forward/lm_head_gemm_dgrad"));
}

TEST(MemoryTimeline, JsonBreaksTheActivationsDownByKind) {
  const Traced t = trace("v1", Precision::fp32());
  const nlohmann::json a = activation_breakdown_json(t.tl);
  std::int64_t sum = 0;
  for (const auto& [kind, bytes] : a["by_kind"].items()) sum += bytes.get<std::int64_t>();
  // Each kind counts its buffers' bytes; the total counts the bytes the
  // scratch over the logits shares with them once.
  EXPECT_EQ(a["shared_bytes"].get<std::int64_t>(), t.tl.shared_bytes);
  EXPECT_EQ(sum - t.tl.shared_bytes, a["activations_bytes"].get<std::int64_t>());
  EXPECT_EQ(sum - t.tl.shared_bytes, t.tl.allocated.activations);
  EXPECT_GT(a["by_kind"]["attention_probs"].get<std::int64_t>(), 0);  // v1 keeps them
  EXPECT_EQ(a["buffers"].size(), t.tl.buffers.size());
  for (const nlohmann::json& b : a["buffers"]) {
    for (const char* key :
         {"name", "kind", "bytes", "offset_bytes", "first_op", "last_op", "lifetimes"}) {
      EXPECT_TRUE(b.contains(key)) << key;
    }
  }

  const nlohmann::json j = memory_timeline_json(t.tl, {}, "none on the cpu");
  for (const char* key : {"allocated", "persistent_bytes", "arena_bytes", "peak", "kinds",
                          "buffers", "ops", "driver_samples", "driver_note"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_TRUE(j["driver_samples"].is_null());
  EXPECT_EQ(j["allocated"]["total_bytes"].get<std::int64_t>(), t.tl.allocated.total());
  EXPECT_EQ(j["peak"]["live_bytes"].get<std::int64_t>(), t.tl.peak_live_bytes);
  ASSERT_EQ(j["ops"].size(), t.tl.ops.size());
  for (const nlohmann::json& op : j["ops"]) {
    std::int64_t live = 0;
    for (const nlohmann::json& b : op["live_buffers"]) {
      live += t.tl.buffers[b.get<std::size_t>()].bytes;
    }
    EXPECT_EQ(live, op["live_bytes"].get<std::int64_t>()) << op["name"];
    std::int64_t by_kind = 0;
    for (const auto& [kind, bytes] : op["live_by_kind"].items())
      by_kind += bytes.get<std::int64_t>();
    EXPECT_EQ(by_kind, live) << op["name"];
  }
  const nlohmann::json sampled = memory_timeline_json(t.tl, {{"after setup", 12345}}, "cuda");
  EXPECT_EQ(sampled["driver_samples"][0]["used_bytes"].get<std::int64_t>(), 12345);
}

// --activations recompute: one SwiGLU output for all layers, written by each
// layer's forward SwiGLU and read by its down GEMM, then remade by each
// layer's backward pass and read by its down weight gradient; the JSON's
// breakdown lists it once and counts [tokens, F] per layer but one less.
TEST(MemoryTimeline, RecomputedSwigluOutputLivesOncePerLayerAndPass) {
  for (const char* level : {"v1", "v3"}) {
    SCOPED_TRACE(level);
    const Traced stored = trace(level, Precision::fp32());
    const Traced t = trace(level, Precision::fp32(), ActivationsImpl::RecomputeNormsSwiglu);
    const TimelineBuffer& hidden = named(t.tl, "ffn_hidden");
    EXPECT_EQ(hidden.kind, "ffn_intermediates");
    const int layers = t.cfg.num_layers;
    ASSERT_EQ(hidden.lifetimes.size(), static_cast<std::size_t>(2 * layers));
    auto op = [&](int i) { return t.tl.ops[static_cast<std::size_t>(i)].name; };
    for (int l = 0; l < layers; ++l) {
      const std::string fwd = "forward/layer" + std::to_string(l) + "/";
      const std::string bwd = "backward/layer" + std::to_string(layers - 1 - l) + "/";
      const auto [fwd_from, fwd_to] = hidden.lifetimes[static_cast<std::size_t>(l)];
      EXPECT_EQ(op(fwd_from), fwd + "swiglu");
      EXPECT_EQ(op(fwd_to), fwd + "down_gemm");
      const auto [bwd_from, bwd_to] =
          hidden.lifetimes[static_cast<std::size_t>(layers) + static_cast<std::size_t>(l)];
      EXPECT_EQ(op(bwd_from), bwd + "swiglu_recompute");
      EXPECT_EQ(op(bwd_to), bwd + "down_gemm_wgrad");
    }
    // [16 tokens, 24] fp32: 1536 bytes, a multiple of the 256-byte alignment.
    const std::int64_t hidden_bytes = 16 * 24 * 4;
    EXPECT_EQ(hidden.bytes, hidden_bytes);
    const nlohmann::json a = activation_breakdown_json(t.tl);
    const nlohmann::json s = activation_breakdown_json(stored.tl);
    EXPECT_EQ(s["by_kind"]["ffn_intermediates"].get<std::int64_t>() -
                  a["by_kind"]["ffn_intermediates"].get<std::int64_t>(),
              (layers - 1) * hidden_bytes);
    int listed = 0;
    for (const nlohmann::json& b : a["buffers"]) {
      // "ffn_hidden" or "layerN.ffn_hidden", not the gradient "d_ffn_hidden".
      const std::string name = b["name"].get<std::string>();
      const bool saved_hidden =
          name == "ffn_hidden" || name.find(".ffn_hidden") != std::string::npos;
      listed += saved_hidden ? 1 : 0;
    }
    EXPECT_EQ(listed, 1);
  }
}

TEST(MemoryTimeline, PlotHasOneAreaPerKindAndALegend) {
  const Traced t = trace("v2", Precision::fp32());
  const std::string svg = memory_timeline_svg(t.tl, "a <title> & more");
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("a &lt;title&gt; &amp; more"), std::string::npos);
  std::size_t paths = 0;
  for (std::size_t at = svg.find("<path "); at != std::string::npos;
       at = svg.find("<path ", at + 1))
    ++paths;
  EXPECT_EQ(paths, t.tl.kinds().size());
  for (const std::string& kind : t.tl.kinds()) {
    EXPECT_NE(svg.find(">" + kind + "</text>"), std::string::npos) << kind;
  }
}

}  // namespace
}  // namespace tinyllama::prof
