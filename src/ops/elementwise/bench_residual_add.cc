// The kernel bench's residual add.
#include <string>

#include "bench/device_buffers.h"
#include "bench/reference.h"
#include "cpu/cpu_backend.h"
#include "ops/elementwise/bench_residual_add.h"

namespace tinyllama::bench {
namespace {

// out = a + b on [T, D]. The forward pass adds in place (h += x) and the
// backward out of place; both move the same bytes, and out of place keeps
// repeated runs from growing the values.
class ResidualAddCase final : public OpCase {
 public:
  explicit ResidualAddCase(BenchContext& ctx) : ctx_(ctx), buffers_(ctx.gpu, ctx.seed) {
    const std::int64_t t = ctx.tokens();
    const std::int64_t d = ctx.cfg.hidden_dim;
    a_ = buffers_.random(t, d, ctx.act(), -1, 1);
    b_ = buffers_.random(t, d, ctx.act(), -1, 1);
    out_ = buffers_.poisoned(t, d, ctx.act());
  }

  void run() override { ctx_.gpu.add(out_, a_, b_); }

  CheckResult check() override {
    Backend& gpu = ctx_.gpu;
    const Index rows = leading_rows(a_.rows, a_.cols, ctx_.check_elements);
    const Index cols = all_of(a_.cols);
    HostMat a = gather(gpu, a_, rows, cols);
    HostMat b = gather(gpu, b_, rows, cols);
    run();
    HostMat out(static_cast<std::int64_t>(rows.size()), a_.cols);
    CpuBackend cpu;
    cpu.add(out.mat(), a.mat(), b.mat());
    Comparison cmp;
    cmp.add("out", gather(gpu, out_, rows, cols), out);
    return cmp.result(rows_scope(rows, a_.rows));
  }

 private:
  BenchContext& ctx_;
  DeviceBuffers buffers_;
  Mat a_, b_, out_;
};

}  // namespace

std::unique_ptr<OpCase> make_residual_add(BenchContext& ctx) {
  return std::make_unique<ResidualAddCase>(ctx);
}

}  // namespace tinyllama::bench
