// Materialised causal GQA attention (level v1) against the float64
// reference: sequence lengths that are not multiples of 32, GQA ratios
// 1/2/4, head dims 32/64/128, and q/k/v (dq/dk/dv) as column blocks of one
// qkv (d_qkv) buffer, as the model lays them out. lse is float32; probs is
// in the compute dtype.
#include <tuple>

#include "cuda/gpu_test_util.h"
#include "ops/attention/cpu_attention.h"

namespace tinyllama::gpu_test {
namespace {

struct AttnCase {
  int batch, seq, heads, kv_heads, head_dim;
};

const AttnCase kCases[] = {
    {2, 1, 4, 4, 32},     // one position: softmax over a single score
    {2, 7, 4, 2, 64},     // GQA 2
    {1, 33, 8, 2, 128},   // GQA 4, S just past a warp
    {2, 100, 4, 1, 32},   // GQA 4 (one kv head)
    {3, 64, 2, 2, 64},    // no GQA, S a multiple of 32
    {1, 129, 4, 2, 128},  // S just past a multiple of 128
    {2, 45, 6, 2, 64},    // GQA 3
    {1, 70, 3, 1, 128},   // GQA 3 (one kv head), head_dim 128
};

void PrintTo(const AttnCase& c, std::ostream* os) {
  *os << "B" << c.batch << " S" << c.seq << " H" << c.heads << " K" << c.kv_heads << " hd"
      << c.head_dim;
}

using AttnParam = std::tuple<DType, AttnCase>;

class GpuAttention : public GpuParamTest<AttnParam> {};

struct Buffers {
  Twin qkv, q, k, v;
};

Buffers make_qkv(Harness& h, const AttentionShape& s, DType t, double scale) {
  const std::int64_t tokens = static_cast<std::int64_t>(s.batch) * s.seq;
  const std::int64_t qd = static_cast<std::int64_t>(s.heads) * s.head_dim;
  const std::int64_t kvd = static_cast<std::int64_t>(s.kv_heads) * s.head_dim;
  Buffers b;
  b.qkv = h.input(tokens, qd + 2 * kvd, t, scale, 2);
  b.q = col_block(b.qkv, 0, qd);
  b.k = col_block(b.qkv, qd, kvd);
  b.v = col_block(b.qkv, qd + kvd, kvd);
  return b;
}

TEST_P(GpuAttention, ForwardAndBackward) {
  const auto [t, c] = GetParam();
  const AttentionShape s{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim};
  Harness h(t);
  ModelConfig cfg;
  cfg.num_heads = c.heads;
  cfg.num_kv_heads = c.kv_heads;
  cfg.hidden_dim = c.heads * c.head_dim;
  h.prepare(cfg, BatchShape{c.batch, c.seq}, "v1");

  const std::int64_t tokens = static_cast<std::int64_t>(c.batch) * c.seq;
  const std::int64_t qd = static_cast<std::int64_t>(c.heads) * c.head_dim;
  const std::int64_t kvd = static_cast<std::int64_t>(c.kv_heads) * c.head_dim;
  const std::int64_t bh = static_cast<std::int64_t>(c.batch) * c.heads;

  // Scale 1.5: scores of a few units, so the softmax is neither flat nor one-hot.
  const Buffers in = make_qkv(h, s, t, 1.5);
  const Twin out = h.output(tokens, qd, t, 3);
  const Twin lse = h.output(bh, c.seq, DType::F32, 1);
  const Twin probs = h.output(bh * c.seq, c.seq, t, 2);
  cpu::attention_forward(out.cpu, lse.cpu, probs.cpu, in.q.cpu, in.k.cpu, in.v.cpu, s);
  h.gpu().attention_forward(AttentionImpl::Materialized, out.gpu, lse.gpu, probs.gpu, in.q.gpu,
                            in.k.gpu, in.v.gpu, s);
  h.expect_close(probs, tolerance(t), "attention probs (zeros above the diagonal)");
  // lse is stored in fp32, but under AMP it is taken of scores rounded to
  // the compute dtype.
  h.expect_close(lse, low_precision(t) ? tolerance(t) : tolerance(DType::F32), "attention lse");
  h.expect_close(out, tolerance(t), "attention out");

  // Backward from the reference's saved forward results (rounded to the
  // compute dtype), so only the backward kernels are measured.
  const Twin out_saved = h.copy_of(out.cpu, t, 1);
  const Twin lse_saved = h.copy_of(lse.cpu, DType::F32);
  const Twin probs_saved = h.copy_of(probs.cpu, t, 3);
  const Twin dout = h.input(tokens, qd, t, 1.0, 1);
  const Twin dqkv = h.output(tokens, qd + 2 * kvd, t, 2);
  const Twin dq = col_block(dqkv, 0, qd);
  const Twin dk = col_block(dqkv, qd, kvd);
  const Twin dv = col_block(dqkv, qd + kvd, kvd);
  cpu::attention_backward(dq.cpu, dk.cpu, dv.cpu, dout.cpu, in.q.cpu, in.k.cpu, in.v.cpu,
                          lse_saved.cpu, probs_saved.cpu, s);
  h.gpu().attention_backward(AttentionImpl::Materialized, dq.gpu, dk.gpu, dv.gpu, dout.gpu,
                             in.q.gpu, in.k.gpu, in.v.gpu, out_saved.gpu, lse_saved.gpu,
                             probs_saved.gpu, s);
  h.expect_close(dq, tolerance(t), "attention dq");
  h.expect_close(dk, tolerance(t), "attention dk (summed over the group)");
  h.expect_close(dv, tolerance(t), "attention dv (summed over the group)");
  EXPECT_TRUE(std::isfinite(h.rel_err(dqkv))) << "part of d_qkv was not written";
}

std::string attn_name(const ::testing::TestParamInfo<AttnParam>& info) {
  const auto& [t, c] = info.param;
  return dtype_label(t) + "_B" + std::to_string(c.batch) + "_S" + std::to_string(c.seq) + "_H" +
         std::to_string(c.heads) + "_K" + std::to_string(c.kv_heads) + "_hd" +
         std::to_string(c.head_dim);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuAttention,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::ValuesIn(kCases)),
                         attn_name);

// Forward then backward on the device's own saved tensors, the way the model
// chains them: the gradients still match the reference's chain.
TEST_F(GpuTest, AttentionChainedFloat32) {
  const AttentionShape s{2, 45, 4, 2, 64};
  Harness h(DType::F32);
  ModelConfig cfg;
  cfg.num_heads = s.heads;
  cfg.num_kv_heads = s.kv_heads;
  cfg.hidden_dim = s.heads * s.head_dim;
  h.prepare(cfg, BatchShape{s.batch, s.seq}, "v1");
  const std::int64_t tokens = static_cast<std::int64_t>(s.batch) * s.seq;
  const std::int64_t qd = static_cast<std::int64_t>(s.heads) * s.head_dim;
  const std::int64_t kvd = static_cast<std::int64_t>(s.kv_heads) * s.head_dim;
  const std::int64_t bh = static_cast<std::int64_t>(s.batch) * s.heads;
  const Buffers in = make_qkv(h, s, DType::F32, 1.0);
  const Twin out = h.output(tokens, qd, DType::F32);
  const Twin lse = h.output(bh, s.seq, DType::F32);
  const Twin probs = h.output(bh * s.seq, s.seq, DType::F32);
  cpu::attention_forward(out.cpu, lse.cpu, probs.cpu, in.q.cpu, in.k.cpu, in.v.cpu, s);
  h.gpu().attention_forward(AttentionImpl::Materialized, out.gpu, lse.gpu, probs.gpu, in.q.gpu,
                            in.k.gpu, in.v.gpu, s);
  const Twin dout = h.input(tokens, qd, DType::F32);
  const Twin dqkv = h.output(tokens, qd + 2 * kvd, DType::F32);
  cpu::attention_backward(col_block(dqkv, 0, qd).cpu, col_block(dqkv, qd, kvd).cpu,
                          col_block(dqkv, qd + kvd, kvd).cpu, dout.cpu, in.q.cpu, in.k.cpu,
                          in.v.cpu, lse.cpu, probs.cpu, s);
  h.gpu().attention_backward(AttentionImpl::Materialized, col_block(dqkv, 0, qd).gpu,
                             col_block(dqkv, qd, kvd).gpu, col_block(dqkv, qd + kvd, kvd).gpu,
                             dout.gpu, in.q.gpu, in.k.gpu, in.v.gpu, out.gpu, lse.gpu, probs.gpu,
                             s);
  h.expect_close(col_block(dqkv, 0, qd), tolerance(DType::F32), "dq");
  h.expect_close(col_block(dqkv, qd, kvd), tolerance(DType::F32), "dk");
  h.expect_close(col_block(dqkv, qd + kvd, kvd), tolerance(DType::F32), "dv");
}

}  // namespace
}  // namespace tinyllama::gpu_test
