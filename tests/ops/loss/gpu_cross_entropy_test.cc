// Cross-entropy forward (per-row losses, float32) and backward against the
// float64 reference: odd vocabularies, padded rows, large logits, a loss
// scale, and the in-place backward the model uses (dlogits aliases logits).
#include <tuple>

#include "cuda/gpu_test_util.h"
#include "ops/loss/cpu_cross_entropy.h"
#include "ops/loss/cross_entropy_rows.h"
#include "ops/loss/cuda_cross_entropy.h"

namespace tinyllama::gpu_test {
namespace {

// (dtype, rows, vocab)
using CeParam = std::tuple<DType, std::int64_t, std::int64_t>;

class GpuCrossEntropy : public GpuParamTest<CeParam> {};

TEST_P(GpuCrossEntropy, ForwardAndBackward) {
  const auto [t, rows, vocab] = GetParam();
  Harness h(t);
  const Tokens targets = h.tokens(h.random_ids(rows, static_cast<int>(vocab)));
  // Logits around 30, far from zero, exercise the max subtraction. Spread 2:
  // no row is so one-hot that its loss falls below what fp32 resolves (the
  // relative check is against the largest loss).
  const Twin logits = h.input(rows, vocab, t, 2.0, 3, 30.0);

  const Twin losses = h.output(rows, 1, DType::F32);
  cpu::cross_entropy_forward(losses.cpu, logits.cpu, targets.cpu);
  h.gpu().cross_entropy_forward(losses.gpu, logits.gpu, targets.gpu);
  // fp32 arithmetic on exactly-shared logits: the fp32 tolerance, loosened
  // by the few ulps of expf/logf.
  h.expect_close(losses, 1e-5 * 5, "cross_entropy_forward losses (float32)");

  const float scale = 1024.0f / static_cast<float>(rows);  // a loss scale over the mean
  const Twin dlogits = h.output(rows, vocab, t, 1);
  cpu::cross_entropy_backward(dlogits.cpu, logits.cpu, targets.cpu, scale);
  h.gpu().cross_entropy_backward(dlogits.gpu, logits.gpu, targets.gpu, scale);
  h.expect_close(dlogits, tolerance(t), "cross_entropy_backward");

  // In place, as the model calls it: dlogits overwrites logits.
  cpu::cross_entropy_backward(logits.cpu, logits.cpu, targets.cpu, scale);
  h.gpu().cross_entropy_backward(logits.gpu, logits.gpu, targets.gpu, scale);
  h.expect_close(logits, tolerance(t), "cross_entropy_backward in place");
}

// LossImpl::Chunked's one-kernel loss and gradient: the losses of the
// forward and, over the logits, the in-place backward with the scale read
// from the staged step scalars. Rows padded as the model pads them (to a
// multiple of 128: the vector path with an odd vocabulary's scalar tail)
// and by an odd 3 (the scalar path); the poisoned padding must stay unread
// and unwritten.
// Called with the plan's kernel choice `pick` (KernelChoices::loss_rows).
void expect_fused_matches(DType t, std::int64_t rows, std::int64_t vocab, LossRows pick,
                          const std::string& kernel) {
  for (const std::int64_t pad : {std::int64_t{3}, (vocab + 127) / 128 * 128 - vocab}) {
    Harness h(t);
    const Tokens targets = h.tokens(h.random_ids(rows, static_cast<int>(vocab)));
    const Twin logits = h.input(rows, vocab, t, 2.0, pad, 30.0);
    const Twin losses = h.output(rows, 1, DType::F32);
    StepScalars host;
    host.ce_grad_scale = 1024.0f / static_cast<float>(rows);
    void* staged = h.gpu().allocate(sizeof(StepScalars));
    h.gpu().upload(staged, &host, sizeof(StepScalars));
    cpu::cross_entropy_forward(losses.cpu, logits.cpu, targets.cpu);
    cpu::cross_entropy_backward(logits.cpu, logits.cpu, targets.cpu, host.ce_grad_scale);
    cuda::cross_entropy_fused(losses.gpu, logits.gpu, targets.gpu,
                              &static_cast<const StepScalars*>(staged)->ce_grad_scale, pick,
                              static_cast<cudaStream_t>(h.gpu().main_stream_handle()));
    const std::string where =
        " (row padding " + std::to_string(pad) + ", " + kernel + " kernel where vectors)";
    h.expect_close(losses, 1e-5 * 5, "cross_entropy_fused losses (float32)" + where);
    h.expect_close(logits, tolerance(t), "cross_entropy_fused dlogits" + where);
    h.gpu().synchronize();
    h.gpu().release(staged);
  }
}

// Each of cross_entropy_fused's kernels: the row staged in shared memory
// (Auto at 24 KiB rows and up; the pin Staged wherever the row fits) or
// streamed (Streamed). A row too long for shared memory (fp32 at vocab
// 60000: 240 KB) runs streamed under every pin.
TEST_P(GpuCrossEntropy, FusedMatchesForwardThenInPlaceBackward) {
  const auto [t, rows, vocab] = GetParam();
  const std::int64_t row_bytes = vocab * static_cast<std::int64_t>(dtype_size(t));
  for (const LossRows pin : {LossRows::Auto, LossRows::Staged, LossRows::Streamed}) {
    const bool staged = cuda::cross_entropy_rows_staged(vocab, t, pin);
    if (pin == LossRows::Streamed || row_bytes > 227 * 1024) EXPECT_FALSE(staged);
    if (pin == LossRows::Auto && row_bytes < cuda::kCrossEntropyStagedMinRowBytes) {
      EXPECT_FALSE(staged);
    }
    // Rows that fit in any sm_80+ block's shared memory are staged when asked.
    if (pin == LossRows::Staged && row_bytes <= 96 * 1024) EXPECT_TRUE(staged);
    if (pin == LossRows::Auto && row_bytes >= cuda::kCrossEntropyStagedMinRowBytes &&
        row_bytes <= 96 * 1024) {
      EXPECT_TRUE(staged);
    }
    expect_fused_matches(t, rows, vocab, pin, std::string(staged ? "staged" : "streamed"));
  }
}

std::string ce_name(const ::testing::TestParamInfo<CeParam>& info) {
  const auto [t, rows, vocab] = info.param;
  return dtype_label(t) + "_rows" + std::to_string(rows) + "_V" + std::to_string(vocab);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuCrossEntropy,
                         ::testing::Combine(::testing::ValuesIn(gpu_dtypes()),
                                            ::testing::Values<std::int64_t>(1, 7, 100),
                                            ::testing::Values<std::int64_t>(5, 37, 1001, 32000,
                                                                            50257, 60000)),
                         ce_name);

}  // namespace
}  // namespace tinyllama::gpu_test
