// Flash attention (level v2: empty probs, P recomputed from lse) against the
// float64 reference in the same mode, on shapes that stress the tiling:
// sequence lengths that are not multiples of the 32/64-row tiles (1, 7, 33,
// 100, 129, 257, 300) and one long enough for many key tiles, head dims
// 32/64/96/128, GQA ratios 1/2/3/4, batch 1 to 3. q/k/v (dq/dk/dv) are column blocks of one
// qkv (d_qkv) buffer as the model lays them out; half the cases pad every
// row by 2 elements, so the kernels take their unaligned (element-wise) load
// path, the other half their 16-byte path. Device outputs start as NaN.
#include <algorithm>
#include <tuple>

#include "cuda/gpu_test_util.h"
#include "ops/attention/cpu_attention.h"

namespace tinyllama::gpu_test {
namespace {

struct FlashCase {
  int batch, seq, heads, kv_heads, head_dim;
  int pad;  // extra elements per row of every [tokens, *] buffer
};

const FlashCase kCases[] = {
    {1, 1, 2, 2, 32, 0},      // one position: softmax over a single score
    {3, 1, 4, 1, 128, 2},     // one position, GQA 4
    {3, 7, 4, 2, 64, 0},      // a fraction of one tile
    {1, 7, 8, 2, 128, 2},     //
    {1, 33, 4, 4, 128, 0},    // just past a 32-row tile
    {3, 33, 8, 2, 32, 2},     //
    {3, 100, 4, 1, 64, 2},    // GQA 4 with one kv head
    {1, 100, 2, 2, 32, 0},    //
    {1, 129, 8, 4, 64, 0},    // just past two 64-row tiles
    {3, 129, 2, 1, 128, 2},   //
    {1, 257, 4, 2, 128, 0},   // five 64-row tiles, the last one of 1 row
    {3, 257, 4, 4, 64, 2},    //
    {1, 257, 8, 2, 32, 0},    //
    {2, 128, 8, 4, 64, 0},    // the workshop's heads (H8 K4 hd64), exact tiles
    {1, 1024, 2, 1, 64, 0},   // many key tiles: the online softmax rescales often
    {2, 300, 4, 2, 64, 0},    // a 44-row tail of 64-row tiles on the 16-byte path
    {2, 77, 6, 2, 64, 0},     // GQA 3, a 13-row tail
    {1, 200, 12, 4, 128, 2},  // GQA 3 at head_dim 128
    {3, 65, 3, 1, 32, 0},     // GQA 3 with one kv head
    {2, 97, 6, 2, 96, 0},     // head_dim 96 (mma.sync / fp32 only): GQA 3, a 33-row tail
    {3, 1, 4, 1, 96, 2},      // one position, GQA 4
    {1, 257, 8, 8, 96, 0},    // MHA, five 64-row tiles
    {2, 130, 4, 2, 96, 2},    //
};

void PrintTo(const FlashCase& c, std::ostream* os) {
  *os << "B" << c.batch << " S" << c.seq << " H" << c.heads << " K" << c.kv_heads << " hd"
      << c.head_dim << " pad" << c.pad;
}

AttentionShape shape_of(const FlashCase& c) {
  return AttentionShape{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim};
}

// Prepares the backend for the shape at the level (v2: flash attention's scratch).
void prepare_level(Harness& h, const AttentionShape& s, const std::string& level) {
  ModelConfig cfg;
  cfg.num_heads = s.heads;
  cfg.num_kv_heads = s.kv_heads;
  cfg.hidden_dim = s.heads * s.head_dim;
  h.prepare(cfg, BatchShape{s.batch, s.seq}, level);
}

struct Dims {
  std::int64_t tokens, qd, kvd, bh;
  explicit Dims(const AttentionShape& s)
      : tokens(static_cast<std::int64_t>(s.batch) * s.seq),
        qd(static_cast<std::int64_t>(s.heads) * s.head_dim),
        kvd(static_cast<std::int64_t>(s.kv_heads) * s.head_dim),
        bh(static_cast<std::int64_t>(s.batch) * s.heads) {}
};

struct Qkv {
  Twin all, q, k, v;
};

// q, k, v as column blocks of one qkv buffer. Scale 1.5: scores of a few
// units, so the softmax is neither flat nor one-hot.
Qkv make_qkv(Harness& h, const AttentionShape& s, DType t, int pad) {
  const Dims d(s);
  Qkv b;
  b.all = h.input(d.tokens, d.qd + 2 * d.kvd, t, 1.5, pad);
  b.q = col_block(b.all, 0, d.qd);
  b.k = col_block(b.all, d.qd, d.kvd);
  b.v = col_block(b.all, d.qd + d.kvd, d.kvd);
  return b;
}

const Mat kNoProbs{};  // empty: flash attention

using FlashParam = std::tuple<DType, FlashCase>;

class GpuFlashAttention : public GpuParamTest<FlashParam> {};

TEST_P(GpuFlashAttention, ForwardAndBackwardMatchReference) {
  const auto [t, c] = GetParam();
  const AttentionShape s = shape_of(c);
  const Dims d(s);
  Harness h(t);
  prepare_level(h, s, "v2");

  const Qkv in = make_qkv(h, s, t, c.pad);
  const Twin out = h.output(d.tokens, d.qd, t, c.pad);
  const Twin lse = h.output(d.bh, c.seq, DType::F32, 1);
  cpu::attention_forward(out.cpu, lse.cpu, kNoProbs, in.q.cpu, in.k.cpu, in.v.cpu, s);
  h.gpu().attention_forward(AttentionImpl::Flash, out.gpu, lse.gpu, kNoProbs, in.q.gpu, in.k.gpu,
                            in.v.gpu, s);
  h.expect_close(out, tolerance(t), "flash attention out");
  // lse is stored in fp32, but under AMP it is taken of scores from inputs
  // in the compute dtype.
  h.expect_close(lse, low_precision(t) ? tolerance(t) : tolerance(DType::F32),
                 "flash attention lse (row padding must stay untouched)");

  // Backward from the reference's forward results (rounded to the dtype the
  // model would save them in), so only the backward kernels are measured.
  const Twin out_saved = h.copy_of(out.cpu, t, c.pad);
  const Twin lse_saved = h.copy_of(lse.cpu, DType::F32, 1);
  const Twin dout = h.input(d.tokens, d.qd, t, 1.0, c.pad);
  const Twin dqkv = h.output(d.tokens, d.qd + 2 * d.kvd, t, c.pad);
  const Twin dq = col_block(dqkv, 0, d.qd);
  const Twin dk = col_block(dqkv, d.qd, d.kvd);
  const Twin dv = col_block(dqkv, d.qd + d.kvd, d.kvd);
  cpu::attention_backward(dq.cpu, dk.cpu, dv.cpu, dout.cpu, in.q.cpu, in.k.cpu, in.v.cpu,
                          lse_saved.cpu, kNoProbs, s);
  h.gpu().attention_backward(AttentionImpl::Flash, dq.gpu, dk.gpu, dv.gpu, dout.gpu, in.q.gpu,
                             in.k.gpu, in.v.gpu, out_saved.gpu, lse_saved.gpu, kNoProbs, s);
  h.expect_close(dv, tolerance(t), "flash attention dv (summed over the group)");
  if (c.seq > 1) {
    h.expect_close(dq, tolerance(t), "flash attention dq");
    h.expect_close(dk, tolerance(t), "flash attention dk (summed over the group)");
  } else {
    // One key: P = 1, so dS = P (dP - D) is zero in exact arithmetic and both
    // sides hold rounding noise, which a relative comparison would magnify.
    // Require the noise to be small against dv, the gradient that is not zero.
    auto max_abs = [](const std::vector<double>& v) {
      double m = 0;
      for (double x : v) m = std::max(m, std::abs(x));
      return m;
    };
    const double dv_scale = max_abs(h.device_values(dv.gpu));
    EXPECT_LE(max_abs(h.device_values(dq.gpu)), tolerance(t) * dv_scale) << "dq at S = 1";
    EXPECT_LE(max_abs(h.device_values(dk.gpu)), tolerance(t) * dv_scale) << "dk at S = 1";
  }
  EXPECT_TRUE(std::isfinite(h.rel_err(dqkv)))
      << "part of d_qkv was not written, or its row padding was";
}

std::string flash_name(const ::testing::TestParamInfo<FlashParam>& info) {
  const auto& [t, c] = info.param;
  return dtype_label(t) + "_B" + std::to_string(c.batch) + "_S" + std::to_string(c.seq) + "_H" +
         std::to_string(c.heads) + "_K" + std::to_string(c.kv_heads) + "_hd" +
         std::to_string(c.head_dim) + (c.pad != 0 ? "_padded" : "_aligned");
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuFlashAttention,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::ValuesIn(kCases)),
                         flash_name);

// max |a - b| / max |b| over two device tensors of one shape; infinity when
// either holds a non-finite value.
double device_rel_diff(Harness& h, const Mat& a, const Mat& b) {
  const std::vector<double> x = h.device_values(a);
  const std::vector<double> y = h.device_values(b);
  double diff = 0.0;
  double ref = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) return INFINITY;
    diff = std::max(diff, std::abs(x[i] - y[i]));
    ref = std::max(ref, std::abs(y[i]));
  }
  return ref > 0.0 ? diff / ref : diff;
}

class GpuFlashVsMaterialised : public GpuParamTest<DType> {};

// The two GPU attentions chained the way the model chains them (forward,
// then backward on the device's own saved tensors) agree: flash on out, lse
// and the gradients, materialised attention on the same inputs.
TEST_P(GpuFlashVsMaterialised, FlashAgreesWithMaterialisedAttention) {
  const DType t = GetParam();
  for (const AttentionShape& s :
       {AttentionShape{2, 77, 4, 2, 64}, AttentionShape{1, 130, 8, 2, 128},
        AttentionShape{3, 45, 4, 4, 32}, AttentionShape{2, 70, 6, 2, 96}}) {
    SCOPED_TRACE("B" + std::to_string(s.batch) + " S" + std::to_string(s.seq) + " H" +
                 std::to_string(s.heads) + " K" + std::to_string(s.kv_heads) + " hd" +
                 std::to_string(s.head_dim));
    const Dims d(s);
    Harness h(t);
    const Qkv in = make_qkv(h, s, t, 0);
    const Twin dout = h.input(d.tokens, d.qd, t, 1.0);

    // Materialised (v1) first; its scratch is released by the second prepare.
    prepare_level(h, s, "v1");
    const Twin out_m = h.output(d.tokens, d.qd, t);
    const Twin lse_m = h.output(d.bh, s.seq, DType::F32);
    const Twin probs = h.output(d.bh * s.seq, s.seq, t);
    const Twin dqkv_m = h.output(d.tokens, d.qd + 2 * d.kvd, t);
    h.gpu().attention_forward(AttentionImpl::Materialized, out_m.gpu, lse_m.gpu, probs.gpu,
                              in.q.gpu, in.k.gpu, in.v.gpu, s);
    h.gpu().attention_backward(AttentionImpl::Materialized, dqkv_m.gpu.col_block(0, d.qd),
                               dqkv_m.gpu.col_block(d.qd, d.kvd),
                               dqkv_m.gpu.col_block(d.qd + d.kvd, d.kvd), dout.gpu, in.q.gpu,
                               in.k.gpu, in.v.gpu, out_m.gpu, lse_m.gpu, probs.gpu, s);

    prepare_level(h, s, "v2");
    const Twin out_f = h.output(d.tokens, d.qd, t);
    const Twin lse_f = h.output(d.bh, s.seq, DType::F32);
    const Twin dqkv_f = h.output(d.tokens, d.qd + 2 * d.kvd, t);
    h.gpu().attention_forward(AttentionImpl::Flash, out_f.gpu, lse_f.gpu, kNoProbs, in.q.gpu,
                              in.k.gpu, in.v.gpu, s);
    h.gpu().attention_backward(AttentionImpl::Flash, dqkv_f.gpu.col_block(0, d.qd),
                               dqkv_f.gpu.col_block(d.qd, d.kvd),
                               dqkv_f.gpu.col_block(d.qd + d.kvd, d.kvd), dout.gpu, in.q.gpu,
                               in.k.gpu, in.v.gpu, out_f.gpu, lse_f.gpu, kNoProbs, s);

    // Each is within the dtype's tolerance of the reference: within twice
    // that of each other.
    const double tol = 2 * tolerance(t);
    EXPECT_LE(device_rel_diff(h, out_f.gpu, out_m.gpu), tol) << "out";
    EXPECT_LE(device_rel_diff(h, lse_f.gpu, lse_m.gpu), tol) << "lse";
    EXPECT_LE(device_rel_diff(h, dqkv_f.gpu.col_block(0, d.qd), dqkv_m.gpu.col_block(0, d.qd)), tol)
        << "dq";
    EXPECT_LE(
        device_rel_diff(h, dqkv_f.gpu.col_block(d.qd, d.kvd), dqkv_m.gpu.col_block(d.qd, d.kvd)),
        tol)
        << "dk";
    EXPECT_LE(device_rel_diff(h, dqkv_f.gpu.col_block(d.qd + d.kvd, d.kvd),
                              dqkv_m.gpu.col_block(d.qd + d.kvd, d.kvd)),
              tol)
        << "dv";
  }
}

// The backward has no atomics: two calls give bit-identical gradients (a
// graph replay reproduces a step exactly).
TEST_P(GpuFlashVsMaterialised, FlashBackwardIsDeterministic) {
  const DType t = GetParam();
  const AttentionShape s{2, 200, 8, 2, 64};
  const Dims d(s);
  Harness h(t);
  prepare_level(h, s, "v2");
  const Qkv in = make_qkv(h, s, t, 0);
  const Twin dout = h.input(d.tokens, d.qd, t, 1.0);
  const Twin out = h.output(d.tokens, d.qd, t);
  const Twin lse = h.output(d.bh, s.seq, DType::F32);
  h.gpu().attention_forward(AttentionImpl::Flash, out.gpu, lse.gpu, kNoProbs, in.q.gpu, in.k.gpu,
                            in.v.gpu, s);
  const Twin first = h.output(d.tokens, d.qd + 2 * d.kvd, t);
  const Twin second = h.output(d.tokens, d.qd + 2 * d.kvd, t);
  for (const Twin* g : {&first, &second}) {
    h.gpu().attention_backward(AttentionImpl::Flash, g->gpu.col_block(0, d.qd),
                               g->gpu.col_block(d.qd, d.kvd), g->gpu.col_block(d.qd + d.kvd, d.kvd),
                               dout.gpu, in.q.gpu, in.k.gpu, in.v.gpu, out.gpu, lse.gpu, kNoProbs,
                               s);
  }
  const std::vector<double> a = h.device_values(first.gpu);
  const std::vector<double> b = h.device_values(second.gpu);
  ASSERT_EQ(a.size(), b.size());
  std::size_t differing = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!(a[i] == b[i])) ++differing;  // NaN counts as different: unwritten
  }
  EXPECT_EQ(differing, 0u) << "of " << a.size() << " gradient elements";
}

std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) {
  return dtype_label(info.param);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuFlashVsMaterialised, ::testing::ValuesIn(gpu_dtypes()),
                         dtype_param_name);

// Head dims without a kernel are refused with a message, not run wrong.
TEST_F(GpuTest, FlashAttentionRejectsUnsupportedHeadDim) {
  const AttentionShape s{1, 8, 2, 2, 16};
  const Dims d(s);
  Harness h(DType::BF16);
  prepare_level(h, s, "v2");
  const Qkv in = make_qkv(h, s, DType::BF16, 0);
  const Twin out = h.output(d.tokens, d.qd, DType::BF16);
  const Twin lse = h.output(d.bh, s.seq, DType::F32);
  try {
    h.gpu().attention_forward(AttentionImpl::Flash, out.gpu, lse.gpu, kNoProbs, in.q.gpu, in.k.gpu,
                              in.v.gpu, s);
    FAIL() << "head_dim 16 was accepted";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tinyllama::gpu_test
