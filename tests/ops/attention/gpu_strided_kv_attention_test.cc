// The debugging exercise's noncontiguous-kv kernel (docs/EXERCISES.md) is
// slow, not wrong: out and lse against the CPU reference attention in every
// dtype, at GQA ratios 1 to 3, head_dims 32 and 64, sequences shorter and
// longer than a warp's 32 keys, with padded rows.
#include <cstdint>
#include <string>
#include <tuple>

#include "cuda/gpu_test_util.h"
#include "ops/attention/cpu_attention.h"

namespace tinyllama::gpu_test {
namespace {

using StridedParam = std::tuple<DType, int, int, int>;  // dtype, kv heads, head_dim, seq

class GpuStridedKvAttention : public GpuParamTest<StridedParam> {};

TEST_P(GpuStridedKvAttention, MatchesTheReferenceAttention) {
  const auto [t, kv_heads, hd, seq] = GetParam();
  const AttentionShape s{3, seq, 6, kv_heads, hd};
  Harness h(t);
  const std::int64_t tokens = static_cast<std::int64_t>(s.batch) * seq;
  const Twin q = h.input(tokens, s.heads * hd, t, 1.0, 2);
  const Twin k = h.input(tokens, kv_heads * hd, t, 1.0, 1);
  const Twin v = h.input(tokens, kv_heads * hd, t, 1.0, 3);
  const Twin out = h.output(tokens, s.heads * hd, t, 1);
  const Twin lse = h.output(static_cast<std::int64_t>(s.batch) * s.heads, seq, DType::F32, 1);
  cpu::attention_forward(out.cpu, lse.cpu, Mat(), q.cpu, k.cpu, v.cpu, s);
  h.gpu().strided_kv_attention_forward(out.gpu, lse.gpu, q.gpu, k.gpu, v.gpu, s);
  h.expect_close(out, tolerance(t), "strided kv attention out");
  // lse is fp32, of scores from inputs in the compute dtype (as the flash test).
  h.expect_close(lse, low_precision(t) ? tolerance(t) : tolerance(DType::F32),
                 "strided kv attention lse");
}

std::string strided_name(const ::testing::TestParamInfo<StridedParam>& info) {
  const auto [t, kv, hd, seq] = info.param;
  return dtype_label(t) + "_K" + std::to_string(kv) + "_hd" + std::to_string(hd) + "_S" +
         std::to_string(seq);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuStridedKvAttention,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::Values(6, 2), ::testing::Values(32, 64),
                                            ::testing::Values(19, 77)),
                         strided_name);

}  // namespace
}  // namespace tinyllama::gpu_test
