// NormImpl::Fused: the residual add and the RMSNorm in one kernel, forward
// (sum = a + b, out = norm(sum)) and backward (dx = dresidual + the norm's
// input gradient), at the [T, D] shape of a block's residual stream. Out of
// place here, so repeated runs time the same work; the model runs both in
// place, which moves the same bytes.
#include <string>

#include "bench/device_buffers.h"
#include "bench/reference.h"
#include "cpu/cpu_backend.h"
#include "ops/norm/bench_norm.h"

namespace tinyllama::bench {
namespace {

class ResidualNormCase final : public OpCase {
 public:
  ResidualNormCase(BenchContext& ctx, Pass pass)
      : ctx_(ctx), buffers_(ctx.gpu, ctx.seed), pass_(pass) {
    const std::int64_t t = ctx.tokens();
    const std::int64_t d = ctx.cfg.hidden_dim;
    const DType act = ctx.act();
    weight_ = buffers_.random(1, d, act, 0.5, 1.5);
    if (pass == Pass::Forward) {
      a_ = buffers_.random(t, d, act, -2, 2);
      b_ = buffers_.random(t, d, act, -1, 1);
      sum_ = buffers_.poisoned(t, d, act);
      out_ = buffers_.poisoned(t, d, act);
      rstd_ = buffers_.poisoned(t, 1, ctx.stats());
    } else {
      x_ = buffers_.random(t, d, act, -2, 2);
      rstd_ = buffers_.random(t, 1, ctx.stats(), 0.5, 2);
      dout_ = buffers_.random(t, d, act, -1, 1);
      dres_ = buffers_.random(t, d, act, -1, 1);
      dx_ = buffers_.poisoned(t, d, act);
      dweight_ = buffers_.poisoned(1, d, ctx.master());
    }
  }

  void run() override {
    if (pass_ == Pass::Forward) {
      ctx_.gpu.add_rmsnorm_forward(sum_, out_, rstd_, a_, b_, weight_, ctx_.cfg.rms_eps);
    } else {
      ctx_.gpu.rmsnorm_backward_add(dx_, dweight_, dout_, x_, weight_, rstd_, dres_);
    }
  }

  CheckResult check() override {
    return pass_ == Pass::Forward ? check_forward() : check_backward();
  }

 private:
  CheckResult check_forward() {
    Backend& gpu = ctx_.gpu;
    const std::int64_t t = a_.rows;
    const std::int64_t d = a_.cols;
    const Index rows = leading_rows(t, d, ctx_.check_elements);
    const auto n = static_cast<std::int64_t>(rows.size());
    const Index cols = all_of(d);
    HostMat a = gather(gpu, a_, rows, cols);
    HostMat b = gather(gpu, b_, rows, cols);
    HostMat weight = download(gpu, weight_);
    run();
    // The reference normalises the sum as the device stored it (rounded to
    // the activation dtype), which is what the fused kernel normalises too.
    HostMat stored_sum = gather(gpu, sum_, rows, cols);
    HostMat sum(n, d);
    HostMat out(n, d);
    HostMat rstd(n, 1);
    CpuBackend cpu;
    cpu.add(sum.mat(), a.mat(), b.mat());
    cpu.rmsnorm_forward(out.mat(), rstd.mat(), stored_sum.mat(), weight.mat(), ctx_.cfg.rms_eps);
    Comparison cmp;
    cmp.add("sum", stored_sum, sum);
    cmp.add("out", gather(gpu, out_, rows, cols), out);
    cmp.add("rstd", gather(gpu, rstd_, rows, all_of(1)), rstd);
    return cmp.result(rows_scope(rows, t));
  }

  CheckResult check_backward() {
    Backend& gpu = ctx_.gpu;
    const std::int64_t t = x_.rows;
    const std::int64_t d = x_.cols;
    const Index rows = leading_rows(t, d, ctx_.check_elements);
    const auto n = static_cast<std::int64_t>(rows.size());
    const Index cols = all_of(d);
    HostMat x = gather(gpu, x_, rows, cols);
    HostMat dout = gather(gpu, dout_, rows, cols);
    HostMat dres = gather(gpu, dres_, rows, cols);
    HostMat rstd = gather(gpu, rstd_, rows, all_of(1));
    HostMat weight = download(gpu, weight_);
    run();
    HostMat dx(n, d);
    HostMat dweight(1, d);
    CpuBackend cpu;
    cpu.rmsnorm_backward_add(dx.mat(), dweight.mat(), dout.mat(), x.mat(), weight.mat(), rstd.mat(),
                             dres.mat());
    Comparison cmp;
    cmp.add("dx", gather(gpu, dx_, rows, cols), dx);
    // The weight gradient sums over every row: comparable only when all were run.
    if (n == t) {
      cmp.add("dweight", download(gpu, dweight_), dweight);
      return cmp.result(rows_scope(rows, t));
    }
    return cmp.result(rows_scope(rows, t) + " (dx only: dweight sums over all rows)");
  }

  BenchContext& ctx_;
  DeviceBuffers buffers_;
  Pass pass_;
  Mat a_, b_, sum_, out_, x_, weight_, rstd_, dout_, dres_, dx_, dweight_;
};

}  // namespace

std::unique_ptr<OpCase> make_residual_norm(BenchContext& ctx, Pass pass) {
  return std::make_unique<ResidualNormCase>(ctx, pass);
}

}  // namespace tinyllama::bench
