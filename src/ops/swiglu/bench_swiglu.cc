// SwiGLU, fused (one kernel each way) or as the unfused levels run it
// (silu, then mul; backward: two muls and silu's backward, through the
// saved silu(gate)), on the gate and up column blocks of one gate_up buffer.
#include <string>

#include "bench/device_buffers.h"
#include "bench/reference.h"
#include "cpu/cpu_backend.h"
#include "ops/swiglu/bench_swiglu.h"

namespace tinyllama::bench {
namespace {

class SwigluCase final : public OpCase {
 public:
  SwigluCase(BenchContext& ctx, Pass pass, bool fused)
      : ctx_(ctx), buffers_(ctx.gpu, ctx.seed), pass_(pass), fused_(fused) {
    const std::int64_t t = ctx.tokens();
    const std::int64_t f = ctx.cfg.ffn_dim;
    const DType act = ctx.act();
    const Mat gate_up = buffers_.random(t, 2 * f, act, -3, 3);
    gate_ = gate_up.col_block(0, f);
    up_ = gate_up.col_block(f, f);
    if (pass == Pass::Forward) {
      hidden_ = buffers_.poisoned(t, f, act);
      if (!fused) silu_ = buffers_.poisoned(t, f, act);
      return;
    }
    d_hidden_ = buffers_.random(t, f, act, -1, 1);
    const Mat d_gate_up = buffers_.poisoned(t, 2 * f, act);
    d_gate_ = d_gate_up.col_block(0, f);
    d_up_ = d_gate_up.col_block(f, f);
    if (!fused) {
      // The unfused backward reads silu(gate) as the forward saved it.
      silu_ = buffers_.alloc(t, f, act);
      ctx.gpu.silu_forward(silu_, gate_);
      d_silu_ = buffers_.poisoned(t, f, act);
    }
  }

  void run() override {
    Backend& gpu = ctx_.gpu;
    if (pass_ == Pass::Forward) {
      if (fused_) {
        gpu.swiglu_forward(hidden_, gate_, up_);
      } else {
        gpu.silu_forward(silu_, gate_);
        gpu.mul(hidden_, silu_, up_);
      }
    } else if (fused_) {
      gpu.swiglu_backward(d_gate_, d_up_, d_hidden_, gate_, up_);
    } else {
      gpu.mul(d_up_, d_hidden_, silu_);
      gpu.mul(d_silu_, d_hidden_, up_);
      gpu.silu_backward(d_gate_, d_silu_, gate_);
    }
  }

  // The CPU's fused op (a composition of its primitives) is the reference
  // for both forms.
  CheckResult check() override {
    Backend& gpu = ctx_.gpu;
    const std::int64_t t = gate_.rows;
    const std::int64_t f = gate_.cols;
    const Index rows = leading_rows(t, 2 * f, ctx_.check_elements);
    const auto n = static_cast<std::int64_t>(rows.size());
    const Index cols = all_of(f);
    HostMat gate = gather(gpu, gate_, rows, cols);
    HostMat up = gather(gpu, up_, rows, cols);
    CpuBackend cpu;
    Comparison cmp;
    if (pass_ == Pass::Forward) {
      run();
      HostMat hidden(n, f);
      cpu.swiglu_forward(hidden.mat(), gate.mat(), up.mat());
      cmp.add("out", gather(gpu, hidden_, rows, cols), hidden);
    } else {
      HostMat d_hidden = gather(gpu, d_hidden_, rows, cols);
      run();
      HostMat d_gate(n, f);
      HostMat d_up(n, f);
      cpu.swiglu_backward(d_gate.mat(), d_up.mat(), d_hidden.mat(), gate.mat(), up.mat());
      cmp.add("dgate", gather(gpu, d_gate_, rows, cols), d_gate);
      cmp.add("dup", gather(gpu, d_up_, rows, cols), d_up);
    }
    return cmp.result(rows_scope(rows, t));
  }

 private:
  BenchContext& ctx_;
  DeviceBuffers buffers_;
  Pass pass_;
  bool fused_;
  Mat gate_, up_, hidden_, silu_;
  Mat d_hidden_, d_gate_, d_up_, d_silu_;
};

}  // namespace

std::unique_ptr<OpCase> make_swiglu(BenchContext& ctx, Pass pass, bool fused) {
  return std::make_unique<SwigluCase>(ctx, pass, fused);
}

}  // namespace tinyllama::bench
