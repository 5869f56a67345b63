// The kernel bench's shapes and options: DESIGN §5's presets, the override
// rules shared with `tinyllama train`, the parsing of the list flags, and
// the arithmetic of the summaries (medians, roofline, table alignment).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/device_buffers.h"
#include "bench/reference.h"
#include "bench/roofline.h"
#include "bench/sample_stats.h"
#include "bench/shapes.h"
#include "bench/text_table.h"
#include "core/errors.h"
#include "io/hf_weights.h"

namespace tinyllama::bench {
namespace {

TEST(BenchShapes, PresetsAreDesignSection5) {
  const std::vector<BenchShape> all = parse_configs("all");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].describe(), "D512 L8 H8 K4 hd64 F2048 V1000, B8 S128 (1024 tokens)");
  EXPECT_EQ(all[1].describe(), "D512 L8 H8 K4 hd64 F2048 V1000, B32 S1024 (32768 tokens)");
  EXPECT_EQ(all[2].describe(), "D2048 L16 H32 K16 hd64 F8192 V32000, B8 S1024 (8192 tokens)");
  EXPECT_EQ(all[0].name, "workshop");
  EXPECT_EQ(all[2].name, "1b");
}

TEST(BenchShapes, ConfigListKeepsOrderAndDropsRepeats) {
  const std::vector<BenchShape> s = parse_configs("1b, workshop,1b");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "1b");
  EXPECT_EQ(s[1].name, "workshop");
  EXPECT_THROW(parse_configs("2b"), UsageError);
  EXPECT_THROW(parse_configs(""), UsageError);
}

TEST(BenchShapes, OverridesFollowTheTrainDefaults) {
  const BenchShape workshop = preset_shapes().front();
  ShapeOverrides o;
  o.hidden_dim = 768;
  o.num_heads = 12;
  BenchShape s = apply_overrides(workshop, o);
  EXPECT_EQ(s.cfg.ffn_dim, 4 * 768);  // F follows D unless given
  EXPECT_EQ(s.cfg.num_kv_heads, 6);   // K = H/2 unless given
  o.num_heads = 3;
  o.hidden_dim = 96;
  EXPECT_EQ(apply_overrides(workshop, o).cfg.num_kv_heads, 3);  // odd H: K = H
  ShapeOverrides only_batch;
  only_batch.batch_size = 2;
  only_batch.seq_len = 64;
  s = apply_overrides(workshop, only_batch);
  EXPECT_EQ(s.cfg.hidden_dim, 512);
  EXPECT_EQ(s.batch.tokens(), 128);
}

TEST(BenchShapes, BadOverridesNameTheirFlag) {
  const BenchShape workshop = preset_shapes().front();
  auto message = [&](ShapeOverrides o) {
    try {
      apply_overrides(workshop, o);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  ShapeOverrides o;
  o.hidden_dim = 30;
  EXPECT_EQ(message(o), "--hidden-dim 30: must be divisible by --num-heads 8");
  o = {};
  o.num_kv_heads = 3;
  EXPECT_EQ(message(o), "--num-heads 8: must be divisible by --num-kv-heads 3");
  o = {};
  o.seq_len = 1;
  EXPECT_EQ(message(o), "--seq-len 1: must be at least 2");
  o = {};
  o.batch_size = 0;
  EXPECT_EQ(message(o), "--batch-size 0: must be at least 1");
}

TEST(BenchOptions, PrecisionList) {
  const std::vector<Precision> p = parse_precisions("bf16,fp32,bf16");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(precision_label(p[0]), "bf16");
  EXPECT_TRUE(p[0].mixed());
  EXPECT_EQ(p[0].master, DType::F32);
  EXPECT_EQ(precision_label(p[1]), "fp32");
  EXPECT_EQ(parse_precisions("all").size(), 3u);
  EXPECT_THROW(parse_precisions("fp8"), UsageError);
  EXPECT_THROW(parse_precisions(" , "), UsageError);
}

TEST(BenchOptions, TimingModeRepeatsAndWarmup) {
  EXPECT_EQ(parse_timing_mode("graph"), TimingMode::Graph);
  EXPECT_EQ(parse_timing_mode("eager"), TimingMode::Eager);
  EXPECT_THROW(parse_timing_mode("cuda"), UsageError);
  EXPECT_THROW(check_repeats(0), UsageError);
  EXPECT_NO_THROW(check_repeats(1));
  EXPECT_THROW(check_repeats(100000), UsageError);
  EXPECT_THROW(check_warmup(0), UsageError);
  EXPECT_NO_THROW(check_warmup(1));
}

TEST(BenchStats, MedianPercentileMinimum) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);  // between the middle two
  EXPECT_DOUBLE_EQ(median({7}), 7);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 0), 1);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 100), 5);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 25), 2);
  EXPECT_DOUBLE_EQ(percentile({10, 20}, 90), 19);
  EXPECT_DOUBLE_EQ(minimum({3, 1, 2}), 1);
  EXPECT_TRUE(std::isnan(median({})));
  EXPECT_TRUE(std::isnan(minimum({})));
}

// The fills' fast 16-bit encoders against the safetensors code's
// conversions: every float whose upper 16 bits are one of the 2^16 patterns
// (all exponents, signs and top mantissas), with low bits that probe the
// rounding (below, at and above the halfway point, odd and even).
TEST(BenchFill, FastEncodersRoundLikeTheReference) {
  for (std::uint32_t hi = 0; hi < (1u << 16); ++hi) {
    for (const std::uint32_t lo : {0x0000u, 0x0fffu, 0x1000u, 0x1001u, 0x2000u, 0x7fffu, 0x8000u,
                                   0x8001u, 0xc000u, 0xffffu}) {
      const std::uint32_t bits = hi << 16 | lo;
      float f;
      std::memcpy(&f, &bits, 4);
      if (std::isnan(f)) continue;
      ASSERT_EQ(bf16_bits(f), round_to_bf16_bits(f)) << std::hex << bits;
      ASSERT_EQ(f16_bits(f), round_to_f16_bits(f)) << std::hex << bits;
    }
  }
}

TEST(BenchFill, UniformStreamsAreSeededAndInRange) {
  double lo = 1, hi = 0;
  for (std::uint64_t i = 0; i < 100000; ++i) {
    const double u = uniform_at(7, i);
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_GE(lo, 0.0);
  EXPECT_LT(lo, 1e-3);
  EXPECT_LT(hi, 1.0);
  EXPECT_GT(hi, 1 - 1e-3);
  EXPECT_EQ(uniform_at(7, 5), uniform_at(7, 5));
  EXPECT_NE(uniform_at(7, 5), uniform_at(8, 5));
}

TEST(BenchIndex, SpreadLeadingRowsAndMerge) {
  EXPECT_EQ(spread(10, 3), (Index{0, 4, 9}));
  EXPECT_EQ(spread(3, 64), (Index{0, 1, 2}));  // all, when asked for more
  EXPECT_EQ(spread(5, 1), (Index{0}));
  EXPECT_EQ(leading_rows(100, 10, 250).size(), 25u);
  EXPECT_EQ(leading_rows(100, 10, 5).size(), 1u);       // at least one row
  EXPECT_EQ(leading_rows(100, 10, 5000).size(), 100u);  // at most all
  // Whole sequences of 16 rows: 25 rows fit, 16 are taken; never fewer than one sequence.
  EXPECT_EQ(leading_rows(100, 10, 250, 16).size(), 16u);
  EXPECT_EQ(leading_rows(100, 10, 5, 16).size(), 16u);
  EXPECT_EQ(leading_rows(100, 10, 5000, 16).size(), 100u);
  EXPECT_EQ(merged({0, 2, 4}, {1, 2, 9}), (Index{0, 1, 2, 4, 9}));
}

TEST(BenchRoofline, BoundIsTheSlowerOfComputeAndMemory) {
  const Roof roof{1000, 4000};  // TFLOP/s, GB/s
  // 4 GB at 4000 GB/s = 1000 µs; 1 TFLOP at 1000 TFLOP/s = 1000 µs.
  Rates r = rates(0, 4'000'000'000, 2000, roof);
  EXPECT_DOUBLE_EQ(r.gbs, 2000);
  EXPECT_DOUBLE_EQ(r.tflops, 0);
  EXPECT_DOUBLE_EQ(r.roof_us, 1000);
  EXPECT_DOUBLE_EQ(r.pct_of_roof, 50);
  r = rates(2'000'000'000'000, 4'000'000'000, 2000, roof);  // compute-bound: 2000 µs
  EXPECT_DOUBLE_EQ(r.roof_us, 2000);
  EXPECT_DOUBLE_EQ(r.pct_of_roof, 100);
  EXPECT_DOUBLE_EQ(r.tflops, 1000);
  // Faster than device memory allows: served from the L2.
  EXPECT_GT(rates(0, 4'000'000'000, 500, roof).pct_of_roof, 100);
  // No roof for an unknown device, but the rates stand.
  r = rates(1'000'000, 1'000'000, 1, Roof{});
  EXPECT_TRUE(std::isnan(r.pct_of_roof));
  EXPECT_DOUBLE_EQ(r.gbs, 1000);
}

TEST(BenchTextTable, AlignsByCharactersNotBytes) {
  using A = TextTable::Align;
  TextTable t({{"op", A::Left}, {"median µs", A::Right}});
  t.add_row({"rmsnorm.fwd", "3.10"});
  t.add_row({"attention.bwd", "120.5"});
  t.add_note_row({"x"}, "skipped: because");
  const std::string text = t.render();
  EXPECT_EQ(text,
            "op             median µs\n"
            "rmsnorm.fwd         3.10\n"
            "attention.bwd      120.5\n"
            "x              skipped: because\n");
  EXPECT_EQ(display_width("µs"), 2u);
}

}  // namespace
}  // namespace tinyllama::bench
