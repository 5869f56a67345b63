// The kernel bench's RMSNorm (forward and backward) on a [T, D] activation,
// and the apply that remakes a norm's output from its saved rstd.
#include <string>

#include "bench/device_buffers.h"
#include "bench/reference.h"
#include "cpu/cpu_backend.h"
#include "ops/norm/bench_norm.h"

namespace tinyllama::bench {
namespace {

class RmsNormCase final : public OpCase {
 public:
  RmsNormCase(BenchContext& ctx, Pass pass) : ctx_(ctx), buffers_(ctx.gpu, ctx.seed), pass_(pass) {
    const std::int64_t t = ctx.tokens();
    const std::int64_t d = ctx.cfg.hidden_dim;
    const DType act = ctx.act();
    x_ = buffers_.random(t, d, act, -2, 2);
    weight_ = buffers_.random(1, d, act, 0.5, 1.5);  // the compute copy of the norm weight
    if (pass == Pass::Forward) {
      out_ = buffers_.poisoned(t, d, act);
      rstd_ = buffers_.poisoned(t, 1, ctx.stats());
    } else {
      // Any positive rstd is a valid input; the reference uses the same.
      rstd_ = buffers_.random(t, 1, ctx.stats(), 0.5, 2);
      dout_ = buffers_.random(t, d, act, -1, 1);
      dx_ = buffers_.poisoned(t, d, act);
      dweight_ = buffers_.poisoned(1, d, ctx.master());
    }
  }

  void run() override {
    if (pass_ == Pass::Forward) {
      ctx_.gpu.rmsnorm_forward(out_, rstd_, x_, weight_, ctx_.cfg.rms_eps);
    } else {
      ctx_.gpu.rmsnorm_backward(dx_, dweight_, dout_, x_, weight_, rstd_);
    }
  }

  CheckResult check() override {
    Backend& gpu = ctx_.gpu;
    const std::int64_t t = x_.rows;
    const std::int64_t d = x_.cols;
    const Index rows = leading_rows(t, d, ctx_.check_elements);
    const auto n = static_cast<std::int64_t>(rows.size());
    const Index cols = all_of(d);
    HostMat x = gather(gpu, x_, rows, cols);
    HostMat weight = download(gpu, weight_);
    CpuBackend cpu;
    Comparison cmp;
    if (pass_ == Pass::Forward) {
      run();
      HostMat out(n, d);
      HostMat rstd(n, 1);
      cpu.rmsnorm_forward(out.mat(), rstd.mat(), x.mat(), weight.mat(), ctx_.cfg.rms_eps);
      cmp.add("out", gather(gpu, out_, rows, cols), out);
      cmp.add("rstd", gather(gpu, rstd_, rows, all_of(1)), rstd);
      return cmp.result(rows_scope(rows, t));
    }
    HostMat dout = gather(gpu, dout_, rows, cols);
    HostMat rstd = gather(gpu, rstd_, rows, all_of(1));
    run();
    HostMat dx(n, d);
    HostMat dweight(1, d);
    cpu.rmsnorm_backward(dx.mat(), dweight.mat(), dout.mat(), x.mat(), weight.mat(), rstd.mat());
    cmp.add("dx", gather(gpu, dx_, rows, cols), dx);
    // The weight gradient sums over every row: comparable only when all were run.
    if (n == t) {
      cmp.add("dweight", download(gpu, dweight_), dweight);
      return cmp.result(rows_scope(rows, t));
    }
    return cmp.result(rows_scope(rows, t) + " (dx only: dweight sums over all rows)");
  }

 private:
  BenchContext& ctx_;
  DeviceBuffers buffers_;
  Pass pass_;
  Mat x_, weight_, out_, rstd_, dout_, dx_, dweight_;
};

// out = x * rstd * weight from a saved rstd: what the backward pass runs
// to remake a norm's output instead of keeping it (--activations
// recompute_norms).
class RmsNormApplyCase final : public OpCase {
 public:
  explicit RmsNormApplyCase(BenchContext& ctx) : ctx_(ctx), buffers_(ctx.gpu, ctx.seed) {
    const std::int64_t t = ctx.tokens();
    const std::int64_t d = ctx.cfg.hidden_dim;
    x_ = buffers_.random(t, d, ctx.act(), -2, 2);
    weight_ = buffers_.random(1, d, ctx.act(), 0.5, 1.5);
    rstd_ = buffers_.random(t, 1, ctx.stats(), 0.5, 2);  // any positive rstd is valid
    out_ = buffers_.poisoned(t, d, ctx.act());
  }

  void run() override { ctx_.gpu.rmsnorm_apply(out_, x_, weight_, rstd_); }

  CheckResult check() override {
    Backend& gpu = ctx_.gpu;
    const std::int64_t t = x_.rows;
    const std::int64_t d = x_.cols;
    const Index rows = leading_rows(t, d, ctx_.check_elements);
    const Index cols = all_of(d);
    HostMat x = gather(gpu, x_, rows, cols);
    HostMat rstd = gather(gpu, rstd_, rows, all_of(1));
    HostMat weight = download(gpu, weight_);
    run();
    HostMat out(static_cast<std::int64_t>(rows.size()), d);
    CpuBackend cpu;
    cpu.rmsnorm_apply(out.mat(), x.mat(), weight.mat(), rstd.mat());
    Comparison cmp;
    cmp.add("out", gather(gpu, out_, rows, cols), out);
    return cmp.result(rows_scope(rows, t));
  }

 private:
  BenchContext& ctx_;
  DeviceBuffers buffers_;
  Mat x_, weight_, rstd_, out_;
};

}  // namespace

std::unique_ptr<OpCase> make_rmsnorm(BenchContext& ctx, Pass pass) {
  return std::make_unique<RmsNormCase>(ctx, pass);
}

std::unique_ptr<OpCase> make_rmsnorm_apply(BenchContext& ctx) {
  return std::make_unique<RmsNormApplyCase>(ctx);
}

}  // namespace tinyllama::bench
