// The whole kernel bench, driven with the CPU backend standing in for the
// GPU at a tiny shape: every registry entry is made, checked, timed (eager:
// the CPU has no graphs) and costed, the table and JSON carry every row,
// and a wrong or missing output fails its check. The GPU run differs only
// in the backend it is given.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "bench/report.h"
#include "bench/runner.h"
#include "core/errors.h"
#include "cpu/cpu_backend.h"

namespace tinyllama::bench {
namespace {

// D64 H2 K1 (hd 32, so flash runs too) F96 V50, B2 S16: 32 tokens.
BenchShape tiny() {
  ShapeOverrides o;
  o.hidden_dim = 64;
  o.num_heads = 2;
  o.num_kv_heads = 1;
  o.ffn_dim = 96;
  o.vocab_size = 50;
  o.batch_size = 2;
  o.seq_len = 16;
  BenchShape s = apply_overrides(preset_shapes().front(), o);
  s.name = "tiny";
  return s;
}

BenchOptions tiny_options() {
  BenchOptions o;
  o.shapes = {tiny()};
  o.precisions = {Precision::fp32()};
  for (const OpVariant& v : registry()) o.ops.push_back(&v);
  o.timing.warmup = 1;
  o.timing.repeats = 3;
  return o;
}

BenchReport run_on(const BenchOptions& options, const BackendFactory& factory) {
  int runs_seen = 0;
  BenchReport report =
      run_bench(options, factory, [&](const BenchReport&, const RunResult&) { ++runs_seen; });
  EXPECT_EQ(runs_seen, static_cast<int>(options.shapes.size() * options.precisions.size()));
  return report;
}

BackendFactory cpu_factory() {
  return [](Precision) { return std::make_unique<CpuBackend>(); };
}

// The CPU backend claiming the CUDA flash kernels' head_dims, to reach the
// skip of a variant the plan cannot run.
class FlashLimitedCpu final : public CpuBackend {
 public:
  DeviceCaps caps() const override {
    DeviceCaps caps = CpuBackend::caps();
    caps.flash_head_dims = {32, 64, 128};
    return caps;
  }
};

TEST(BenchOnCpu, EveryEntryRunsChecksAndTimes) {
  const BenchOptions options = tiny_options();
  const BenchReport report = run_on(options, cpu_factory());
  ASSERT_EQ(report.runs.size(), 1u);
  const RunResult& run = report.runs.front();
  ASSERT_EQ(run.ops.size(), registry().size());
  for (const OpResult& r : run.ops) {
    SCOPED_TRACE(r.label());
    if (r.variant == "cudnn") {  // the CPU has no cuDNN: skipped, saying so
      EXPECT_NE(r.skipped.find("no cuDNN"), std::string::npos) << r.skipped;
      continue;
    }
    if (r.variant.rfind("flash-", 0) == 0) {  // a pinned CUDA kernel family
      EXPECT_EQ(r.skipped, "a CUDA kernel family");
      EXPECT_FALSE(r.checked);
      continue;
    }
    EXPECT_EQ(r.skipped, "");
    EXPECT_EQ(r.error, "");
    ASSERT_TRUE(r.checked);
    // The CPU against itself, both in float64 after the fp32 round trip:
    // the same arithmetic up to summation order.
    EXPECT_LE(r.check.max_rel_err, 1e-6) << r.check.worst << " over " << r.check.scope;
    EXPECT_FALSE(r.check.scope.empty());
    EXPECT_EQ(r.timing.samples_us.size(), 3u);
    EXPECT_EQ(r.timing.mode, TimingMode::Eager);  // no graphs on the CPU
    EXPECT_GT(r.median_us, 0);
    EXPECT_GE(r.median_us, r.min_us);
    EXPECT_GT(r.bytes, 0);
    EXPECT_TRUE(std::isfinite(r.rates.gbs));
    EXPECT_TRUE(std::isnan(r.rates.pct_of_roof));  // the CPU has no roof
  }
  EXPECT_EQ(failure_line(report), "");

  const std::string table = format_run(report, run);
  for (const OpVariant& v : registry()) {
    EXPECT_NE(table.find(v.op), std::string::npos) << v.op;
  }
  EXPECT_NE(table.find("median µs"), std::string::npos);
  EXPECT_NE(table.find("batch row 0 of 2, kv heads 0 (query heads 0,1)"), std::string::npos)
      << table;
  const nlohmann::json j = report_json(report);
  ASSERT_EQ(j["runs"].size(), 1u);
  EXPECT_EQ(j["runs"][0]["ops"].size(), registry().size());
  EXPECT_EQ(j["runs"][0]["ops"][0]["status"], "ok");
  EXPECT_TRUE(j["runs"][0]["ops"][0]["pct_of_roof"].is_null());
  EXPECT_EQ(j["runs"][0]["precision"], "fp32");
}

// A shape where every check compares a slice (rows, columns, heads, table
// rows, tensor prefixes), with the CPU budget lowered to match: the
// slicing must pick the same elements on both sides.
TEST(BenchOnCpu, SlicedChecksCompareTheSameElements) {
  ShapeOverrides o;
  o.hidden_dim = 256;
  o.num_heads = 8;
  o.num_kv_heads = 4;  // hd 32; kv heads 0 and 3 are checked
  o.ffn_dim = 384;
  o.vocab_size = 300;
  o.batch_size = 4;
  o.seq_len = 32;
  BenchOptions options = tiny_options();
  options.shapes = {apply_overrides(tiny(), o)};
  options.check_elements = 4096;
  const BenchReport report = run_on(options, cpu_factory());
  for (const OpResult& r : report.runs.front().ops) {
    SCOPED_TRACE(r.label() + ": " + r.check.scope);
    EXPECT_EQ(r.error, "");
    // Skipped on the CPU: no cuDNN, no CUDA kernel families to pin.
    if (r.variant == "cudnn" || r.variant.rfind("flash-", 0) == 0) continue;
    EXPECT_TRUE(r.checked);
    EXPECT_LE(r.check.max_rel_err, 1e-6) << r.check.worst;
    EXPECT_EQ(r.check.scope.find("all 128 rows"), std::string::npos) << "not a slice";
  }
  const std::string table = format_run(report, report.runs.front());
  EXPECT_NE(table.find("batch row 0 of 4, kv heads 0,3 (query heads 0,1,6,7)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("rows 0-15 of 128 (dx only: dweight sums over all rows)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("output rows 64/128 x columns 128/512"), std::string::npos) << table;
}

TEST(BenchOnCpu, NoCheckOnlyTimes) {
  BenchOptions options = tiny_options();
  options.check = false;
  options.ops = select_ops("rmsnorm,adamw");
  const BenchReport report = run_on(options, cpu_factory());
  for (const OpResult& r : report.runs.front().ops) {
    EXPECT_FALSE(r.checked);
    EXPECT_TRUE(r.ok());
  }
}

// A backend whose RMSNorm is off by 1 % and whose SwiGLU forgets its last
// row: the bench must say both fail, and go on with the other ops.
class BrokenBackend final : public CpuBackend {
 public:
  void rmsnorm_forward(Mat out, Mat rstd, Mat x, Mat weight, double eps) override {
    CpuBackend::rmsnorm_forward(out, rstd, x, weight, eps);
    for (std::int64_t r = 0; r < out.rows; ++r) out.ptr<float>()[r * out.ld] *= 1.01f;
  }
  void swiglu_forward(Mat out, Mat gate, Mat up) override {
    CpuBackend::swiglu_forward(out.row_block(0, out.rows - 1), gate.row_block(0, gate.rows - 1),
                               up.row_block(0, up.rows - 1));
  }
};

TEST(BenchOnCpu, WrongAndMissingOutputsFailTheirChecks) {
  BenchOptions options = tiny_options();
  options.ops = select_ops("rmsnorm.fwd,swiglu.fwd:fused,residual_add");
  const BenchReport report =
      run_on(options, [](Precision) { return std::make_unique<BrokenBackend>(); });
  const std::vector<OpResult>& ops = report.runs.front().ops;  // in registry order
  ASSERT_EQ(ops.size(), 3u);
  ASSERT_EQ(ops[0].op, "rmsnorm.fwd");
  EXPECT_TRUE(ops[0].check_failed());
  EXPECT_GT(ops[0].check.max_rel_err, 1e-3);
  EXPECT_EQ(ops[0].check.worst, "out");
  ASSERT_EQ(ops[1].op, "residual_add");
  EXPECT_TRUE(ops[1].ok());
  ASSERT_EQ(ops[2].op, "swiglu.fwd");
  EXPECT_TRUE(ops[2].check_failed());  // the poison (NaN) is still there
  EXPECT_TRUE(std::isinf(ops[2].check.max_rel_err));
  const std::string line = failure_line(report);
  EXPECT_NE(line.find("2 kernel bench ops failed"), std::string::npos) << line;
  EXPECT_NE(line.find("tiny fp32 rmsnorm.fwd"), std::string::npos) << line;
  EXPECT_NE(format_run(report, report.runs.front()).find("FAIL"), std::string::npos);
}

// An op that throws is reported on its row; the ops after it still run.
class ThrowingBackend final : public CpuBackend {
 public:
  void rope_forward(Mat, int, int, double) override {
    throw RuntimeFailure("CUDA error: rope failed (test)");
  }
};

TEST(BenchOnCpu, AFailingOpIsReportedAndTheBenchGoesOn) {
  BenchOptions options = tiny_options();
  options.ops = select_ops("rope.fwd,rope.bwd");
  const BenchReport report =
      run_on(options, [](Precision) { return std::make_unique<ThrowingBackend>(); });
  const std::vector<OpResult>& ops = report.runs.front().ops;
  EXPECT_NE(ops[0].error.find("rope failed"), std::string::npos);
  EXPECT_TRUE(ops[1].ok());
  EXPECT_NE(format_run(report, report.runs.front()).find("ERROR: CUDA error"), std::string::npos);
}

// The ops of `list` at the tiny shape widened to D48, head_dim 24, on a
// backend whose flash kernels lack that head_dim.
BenchReport run_at_head_dim_24(const std::string& list) {
  BenchOptions options = tiny_options();
  ShapeOverrides o;
  o.hidden_dim = 48;  // hd 24
  options.shapes = {apply_overrides(tiny(), o)};
  options.ops = select_ops(list);
  return run_on(options, [](Precision) { return std::make_unique<FlashLimitedCpu>(); });
}

TEST(BenchOnCpu, FlashIsSkippedWhereItsKernelsHaveNoHeadDim) {
  const BenchReport report =
      run_at_head_dim_24("attention.fwd:materialized,attention.fwd:flash,attention.fwd:cudnn");
  const std::vector<OpResult>& ops = report.runs.front().ops;
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_TRUE(ops[0].ok());  // materialised runs at any head_dim
  EXPECT_NE(ops[1].skipped.find("built for head_dim 32, 64, 128 (this model: 24)"),
            std::string::npos)
      << ops[1].skipped;
  EXPECT_EQ(failure_line(report), "");
}

// The ops that run no attention are timed at a head_dim the flash kernels
// lack (they were all skipped there, for the attention their preset names).
TEST(BenchOnCpu, OpsWithoutAttentionRunWhereFlashHasNoHeadDim) {
  const BenchReport report =
      run_at_head_dim_24("rmsnorm.bwd,swiglu.fwd,qkv_gemm.fwd,rope.fwd,attention.bwd:flash");
  const std::vector<OpResult>& ops = report.runs.front().ops;
  ASSERT_GE(ops.size(), 5u);
  for (const OpResult& r : ops) {
    SCOPED_TRACE(r.label());
    if (r.op == "attention.bwd") {
      EXPECT_NE(r.skipped.find("(this model: 24)"), std::string::npos) << r.skipped;
      continue;
    }
    EXPECT_EQ(r.skipped, "");
    EXPECT_TRUE(r.ok());
    EXPECT_TRUE(r.checked);
  }
  EXPECT_EQ(failure_line(report), "");
}

}  // namespace
}  // namespace tinyllama::bench
