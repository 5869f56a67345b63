// The kernel bench's cross-entropy loss over the [T, vocab] logits: the
// unfused forward and backward, and the chunked level's fused kernel.
#include <algorithm>
#include <string>
#include <vector>

#include "bench/device_buffers.h"
#include "bench/reference.h"
#include "cpu/cpu_backend.h"
#include "ops/loss/bench_loss.h"

namespace tinyllama::bench {
namespace {

class CrossEntropyCase final : public OpCase {
 public:
  CrossEntropyCase(BenchContext& ctx, Pass pass)
      : ctx_(ctx), buffers_(ctx.gpu, ctx.seed), pass_(pass) {
    const std::int64_t t = ctx.tokens();
    const int vocab = ctx.cfg.vocab_size;
    // Logits of a few units either way: a softmax neither flat nor one-hot.
    logits_ = buffers_.random(t, vocab, ctx.act(), -4, 4);
    targets_ = buffers_.tokens(t, vocab, host_targets_);
    if (pass == Pass::Forward) {
      losses_ = buffers_.poisoned(t, 1, ctx.stats());
    } else {
      // The model writes dlogits over the logits; a buffer of its own moves
      // the same bytes and keeps the input the same for every repetition.
      dlogits_ = buffers_.poisoned(t, vocab, ctx.act());
    }
  }

  // The mean over B·S positions, as the model scales it (without fp16's
  // loss scale).
  float scale() const { return 1.0f / static_cast<float>(logits_.rows); }

  void run() override {
    if (pass_ == Pass::Forward) {
      ctx_.gpu.cross_entropy_forward(losses_, logits_, targets_);
    } else {
      ctx_.gpu.cross_entropy_backward(dlogits_, logits_, targets_, scale());
    }
  }

  CheckResult check() override {
    Backend& gpu = ctx_.gpu;
    const Index rows = leading_rows(logits_.rows, logits_.cols, ctx_.check_elements);
    const auto n = static_cast<std::int64_t>(rows.size());
    const Index cols = all_of(logits_.cols);
    HostMat logits = gather(gpu, logits_, rows, cols);
    run();
    CpuBackend cpu;
    Comparison cmp;
    // The leading rows' targets are the first n of them.
    if (pass_ == Pass::Forward) {
      HostMat losses(n, 1);
      cpu.cross_entropy_forward(losses.mat(), logits.mat(), host_targets_.data());
      cmp.add("losses", gather(gpu, losses_, rows, all_of(1)), losses);
    } else {
      HostMat dlogits(n, logits_.cols);
      cpu.cross_entropy_backward(dlogits.mat(), logits.mat(), host_targets_.data(), scale());
      cmp.add("dlogits", gather(gpu, dlogits_, rows, cols), dlogits);
    }
    return cmp.result(rows_scope(rows, logits_.rows));
  }

 private:
  BenchContext& ctx_;
  DeviceBuffers buffers_;
  Pass pass_;
  std::vector<std::int32_t> host_targets_;
  const std::int32_t* targets_ = nullptr;
  Mat logits_, losses_, dlogits_;
};

// LossImpl::Chunked's loss and dlogits in one kernel, over the logits in
// place (as the model runs it). Repeated runs turn the logits into
// gradients and back through the softmax: the values stay finite and the
// kernel moves the same bytes each time, which is what the timing needs;
// the check takes whatever logits are there as its input.
class FusedCrossEntropyCase final : public OpCase {
 public:
  explicit FusedCrossEntropyCase(BenchContext& ctx) : ctx_(ctx), buffers_(ctx.gpu, ctx.seed) {
    const std::int64_t t = ctx.tokens();
    const int vocab = ctx.cfg.vocab_size;
    // Rows padded to ModelConfig::padded_vocab() as the model lays them out
    // (16-byte aligned rows whatever the vocabulary: the vector kernels).
    logits_ = buffers_.random(t, ctx.cfg.padded_vocab(), ctx.act(), -4, 4).col_block(0, vocab);
    targets_ = buffers_.tokens(t, vocab, host_targets_);
    losses_ = buffers_.poisoned(t, 1, ctx.stats());
    // The staged step scalars the kernel reads its scale from: the mean over
    // B·S positions, without fp16's loss scale.
    host_scalars_.ce_grad_scale = 1.0f / static_cast<float>(t);
    const Mat scalars = buffers_.poisoned(1, sizeof(StepScalars) / 4, DType::F32);
    ctx.gpu.upload(scalars.data, &host_scalars_, sizeof(StepScalars));
    scalars_ = static_cast<const StepScalars*>(scalars.data);
  }

  void run() override { ctx_.gpu.cross_entropy_fused(losses_, logits_, targets_, scalars_); }

  CheckResult check() override {
    Backend& gpu = ctx_.gpu;
    const Index rows = leading_rows(logits_.rows, logits_.cols, ctx_.check_elements);
    const auto n = static_cast<std::int64_t>(rows.size());
    const Index cols = all_of(logits_.cols);
    HostMat logits = gather(gpu, logits_, rows, cols);
    run();
    CpuBackend cpu;
    HostMat losses(n, 1);
    cpu.cross_entropy_fused(losses.mat(), logits.mat(), host_targets_.data(), &host_scalars_);
    Comparison cmp;
    cmp.add("losses", gather(gpu, losses_, rows, all_of(1)), losses);
    cmp.add("dlogits", gather(gpu, logits_, rows, cols), logits);
    return cmp.result(rows_scope(rows, logits_.rows));
  }

 private:
  BenchContext& ctx_;
  DeviceBuffers buffers_;
  std::vector<std::int32_t> host_targets_;
  const std::int32_t* targets_ = nullptr;
  StepScalars host_scalars_;
  const StepScalars* scalars_ = nullptr;
  Mat logits_, losses_;
};

}  // namespace

std::unique_ptr<OpCase> make_cross_entropy(BenchContext& ctx, Pass pass) {
  return std::make_unique<CrossEntropyCase>(ctx, pass);
}

std::unique_ptr<OpCase> make_cross_entropy_fused(BenchContext& ctx) {
  return std::make_unique<FusedCrossEntropyCase>(ctx);
}

}  // namespace tinyllama::bench
