// RopeImpl::Fused's forward on the GPU: the flash forward kernels take q
// and k as the QKV GEMM wrote them, rotate their Q and K tiles as they load
// them, and write the rotated q, k and v's copy where the backward reads
// them. Each forward kernel family pinned in turn (mma.sync; the wgmma
// kernels with one or two warpgroups, paired heads, the overlapped softmax;
// the warp-specialised TMA kernels, whose producer warps rotate the K
// tiles; fp32's own kernel), in fp32, bf16 and fp16, at shapes that stress
// the tiles and the positions: S = 1, S not a multiple of the tiles, GQA
// 1/2/3/4, head_dim 32/64/128, padded rows, positions past 1000. Each must
// be within the dtype's tolerance of the float64 reference (q, k rotated,
// v copied, out, lse) and of the separate path on the GPU (rope_forward
// over a copy of q|k, then the same pinned kernel); below position 64 the
// rotation is the rope kernel's to the bit (the angles are the table's
// there, composed from two of its rows above). And a block attends with
// the q and k it writes out: the same kernel over the written q_rot, k_rot
// and v_copy gives out and lse to the bit.
#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "core/errors.h"
#include "cuda/gpu_model_util.h"
#include "cuda/gpu_test_util.h"
#include "ops/attention/cpu_attention.h"
#include "ops/attention/flash/flash_attention.h"
#include "ops/attention/flash_forward_pins.h"
#include "ops/rope/cpu_rope.h"

namespace tinyllama::gpu_test {
namespace {

struct RopeCase {
  int batch, seq, heads, kv_heads, head_dim, pad;
};

const RopeCase kCases[] = {
    {2, 1, 4, 1, 64, 0},     // one position: angle 0
    {1, 7, 6, 2, 128, 8},    // a fraction of a tile, GQA 3, padded rows
    {3, 65, 4, 4, 64, 8},    // one past a 64-row tile, MHA
    {2, 200, 8, 2, 64, 0},   // a 72-row tail, GQA 4
    {1, 300, 4, 2, 128, 8},  // GQA 2, a tail of 44 rows
    {2, 97, 4, 2, 32, 0},    // head_dim 32 (the mma.sync / fp32 kernels only)
    {2, 97, 6, 2, 96, 8},    // head_dim 96 (likewise): GQA 3, padded rows
    {1, 1030, 2, 1, 64, 0},  // positions past 1000: angles of ~1e3 rad
};

using RopeParam = std::tuple<DType, ForwardPin, RopeCase>;

class GpuFlashRopeForward : public FlashForwardPinTest<RopeParam> {};

TEST_P(GpuFlashRopeForward, MatchesTheReferenceAndItsOwnWriteOut) {
  const auto [t, pin, c] = GetParam();
  const std::string skip = forward_skip(t, pin);
  if (!skip.empty()) GTEST_SKIP() << skip;
  const AttentionShape s{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim};
  const std::int64_t tokens = static_cast<std::int64_t>(c.batch) * c.seq;
  const std::int64_t qd = static_cast<std::int64_t>(c.heads) * c.head_dim;
  const std::int64_t kvd = static_cast<std::int64_t>(c.kv_heads) * c.head_dim;
  const std::int64_t width = qd + 2 * kvd;
  Harness h(t);
  ModelConfig cfg;
  cfg.num_heads = c.heads;
  cfg.num_kv_heads = c.kv_heads;
  cfg.hidden_dim = c.heads * c.head_dim;
  OpChoices ops = level_preset("v3");
  ops.rope = RopeImpl::Fused;
  const BatchShape shape{c.batch, c.seq};
  const StepPlan plan = test_plan(ops, precision_for(t), h.gpu(), cfg, shape, false, pin.pins());
  ASSERT_EQ(plan.ops.rope, RopeImpl::Fused) << "the plan kept the fused rotation";
  h.gpu().prepare(cfg, shape, plan);  // builds the (cos, sin) table

  // raw: the QKV GEMM's output; rot: where the fused op writes q, k
  // rotated and v copied; sep: the same values, rotated in place by the
  // separate kernel.
  const Twin raw = h.input(tokens, width, t, 1.5, c.pad);
  const Twin rot = h.output(tokens, width, t, c.pad);
  const Twin sep = h.copy_of(raw.cpu, t, c.pad);
  const Twin out = h.output(tokens, qd, t, c.pad);
  const Twin lse = h.output(static_cast<std::int64_t>(c.batch) * c.heads, c.seq, DType::F32, 1);
  const Twin out_sep = h.output(tokens, qd, t, c.pad);
  const Twin lse_sep = h.output(static_cast<std::int64_t>(c.batch) * c.heads, c.seq, DType::F32, 1);
  const Twin out_again = h.output(tokens, qd, t, c.pad);
  const Twin lse_again =
      h.output(static_cast<std::int64_t>(c.batch) * c.heads, c.seq, DType::F32, 1);

  // The float64 reference: rotate a copy of raw, then attention.
  for (std::int64_t r = 0; r < tokens; ++r) {
    for (std::int64_t j = 0; j < width; ++j) {
      rot.cpu.ptr<double>()[r * rot.cpu.ld + j] = raw.cpu.ptr<double>()[r * raw.cpu.ld + j];
    }
  }
  cpu::rope(rot.cpu.col_block(0, qd + kvd), c.seq, c.head_dim, cfg.rope_theta, 1);
  cpu::attention_forward(out.cpu, lse.cpu, Mat{}, col_block(rot, 0, qd).cpu,
                         col_block(rot, qd, kvd).cpu, col_block(rot, qd + kvd, kvd).cpu, s);

  h.gpu().attention_rope_forward(
      AttentionImpl::Flash, out.gpu, lse.gpu, Mat{}, col_block(raw, 0, qd).gpu,
      col_block(raw, qd, kvd).gpu, col_block(raw, qd + kvd, kvd).gpu, col_block(rot, 0, qd).gpu,
      col_block(rot, qd, kvd).gpu, col_block(rot, qd + kvd, kvd).gpu, s, cfg.rope_theta);
  h.gpu().rope_forward(sep.gpu.col_block(0, qd + kvd), c.seq, c.head_dim, cfg.rope_theta);
  h.gpu().attention_forward(AttentionImpl::Flash, out_sep.gpu, lse_sep.gpu, Mat{},
                            col_block(sep, 0, qd).gpu, col_block(sep, qd, kvd).gpu,
                            col_block(sep, qd + kvd, kvd).gpu, s);
  h.gpu().attention_forward(AttentionImpl::Flash, out_again.gpu, lse_again.gpu, Mat{},
                            col_block(rot, 0, qd).gpu, col_block(rot, qd, kvd).gpu,
                            col_block(rot, qd + kvd, kvd).gpu, s);

  const std::string what = std::string(pin.name) + " ";
  const double tol = tolerance(t);
  h.expect_close(rot, tol, what + "q|k rotated, v copied (padding untouched)");
  h.expect_close(out, tol, what + "out");
  h.expect_close(lse, tol, what + "lse");
  EXPECT_TRUE(h.padding_intact(raw.gpu)) << "the input was written";

  const std::vector<double> fused = h.device_values(rot.gpu);
  const std::vector<double> separate = h.device_values(sep.gpu);
  ASSERT_EQ(fused.size(), separate.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < fused.size(); ++i) {
    const std::int64_t row = static_cast<std::int64_t>(i) / width;
    if (row % c.seq < 64) {
      ASSERT_EQ(fused[i], separate[i]) << what << "position " << row % c.seq << ", column "
                                       << static_cast<std::int64_t>(i) % width;
    }
    worst = std::max(worst, std::abs(fused[i] - separate[i]) / (std::abs(separate[i]) + 1.0));
  }
  EXPECT_LE(worst, tol) << what << "the rope kernel's rotation, past position 64";
  EXPECT_EQ(h.device_values(out.gpu), h.device_values(out_again.gpu))
      << what << "out: attended with other q, k than those written out";
  EXPECT_EQ(h.device_values(lse.gpu), h.device_values(lse_again.gpu)) << what << "lse";
}

std::string case_name(const ::testing::TestParamInfo<RopeParam>& info) {
  const auto& [t, pin, c] = info.param;
  return dtype_label(t) + "_" + pin.name + "_B" + std::to_string(c.batch) + "_S" +
         std::to_string(c.seq) + "_H" + std::to_string(c.heads) + "_K" +
         std::to_string(c.kv_heads) + "_hd" + std::to_string(c.head_dim) +
         (c.pad != 0 ? "_padded" : "");
}

INSTANTIATE_TEST_SUITE_P(Families, GpuFlashRopeForward,
                         ::testing::Combine(::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kForwardPins),
                                            ::testing::ValuesIn(kCases)),
                         case_name);

// The kernels write q_rot, k_rot and v_copy while other blocks still read
// q, k and v: outputs that overlap the inputs are refused, not raced.
TEST_F(GpuTest, FusedRopeForwardRefusesOutputsOverTheInputs) {
  const DType t = DType::BF16;
  Harness h(t);
  ModelConfig cfg;
  cfg.num_heads = 2;
  cfg.num_kv_heads = 1;
  cfg.hidden_dim = 128;
  OpChoices ops = level_preset("v3");
  ops.rope = RopeImpl::Fused;
  const BatchShape shape{1, 16};
  h.gpu().prepare(cfg, shape, test_plan(ops, precision_for(t), h.gpu(), cfg, shape));
  const AttentionShape s{1, 16, 2, 1, 64};
  const Twin qkv = h.input(16, 256, t);
  const Twin out = h.output(16, 128, t);
  const Twin lse = h.output(2, 16, DType::F32);
  try {
    h.gpu().attention_rope_forward(
        AttentionImpl::Flash, out.gpu, lse.gpu, Mat{}, col_block(qkv, 0, 128).gpu,
        col_block(qkv, 128, 64).gpu, col_block(qkv, 192, 64).gpu, col_block(qkv, 0, 128).gpu,
        col_block(qkv, 128, 64).gpu, col_block(qkv, 192, 64).gpu, s, cfg.rope_theta);
    ADD_FAILURE() << "rotated in place";
  } catch (const RuntimeFailure& e) {
    EXPECT_NE(std::string(e.what()).find("must not overlap"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tinyllama::gpu_test
