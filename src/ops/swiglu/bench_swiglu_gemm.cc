// The SwiGLU with the GEMM beside it (swiglu gemm), both ways: one kernel
// with the SwiGLU in its epilogue, or the GEMM then the fused SwiGLU kernel
// (Backend's composed default, as the other levels run them), on the same
// buffers, so the two rows of the bench read as before and after.
#include "bench/device_buffers.h"
#include "bench/reference.h"
#include "cpu/cpu_backend.h"
#include "ops/swiglu/bench_swiglu.h"

namespace tinyllama::bench {
namespace {

class SwigluGemmCase final : public OpCase {
 public:
  SwigluGemmCase(BenchContext& ctx, Pass pass, bool in_epilogue)
      : ctx_(ctx), buffers_(ctx.gpu, ctx.seed), pass_(pass), in_epilogue_(in_epilogue) {
    const std::int64_t t = ctx.tokens();
    const std::int64_t d = ctx.cfg.hidden_dim;
    const std::int64_t f = ctx.cfg.ffn_dim;
    const DType act = ctx.act();
    hidden_ = buffers_.poisoned(t, f, act);  // forward: h; backward: the composition's d_hidden
    if (pass == Pass::Forward) {
      x_ = buffers_.random(t, d, act, -1, 1);
      w_ = buffers_.random(2 * f, d, act, -0.05, 0.05);
      gate_up_ = buffers_.poisoned(t, 2 * f, act);
      return;
    }
    x_ = buffers_.random(t, d, act, -1, 1);  // d_out
    w_ = buffers_.random(d, f, act, -0.05, 0.05);
    gate_up_ = buffers_.random(t, 2 * f, act, -3, 3);
    d_gate_up_ = buffers_.poisoned(t, 2 * f, act);
  }

  void run() override {
    Backend& gpu = ctx_.gpu;
    if (pass_ == Pass::Forward) {
      if (in_epilogue_) {
        gpu.gemm_swiglu_forward(gate_up_, hidden_, x_, w_);
      } else {
        gpu.Backend::gemm_swiglu_forward(gate_up_, hidden_, x_, w_);
      }
    } else if (in_epilogue_) {
      gpu.gemm_swiglu_backward(d_gate_up_, hidden_, x_, w_, gate_up_);
    } else {
      gpu.Backend::gemm_swiglu_backward(d_gate_up_, hidden_, x_, w_, gate_up_);
    }
  }

  // The CPU's composition on the leading rows is the reference for both.
  CheckResult check() override {
    Backend& gpu = ctx_.gpu;
    const std::int64_t t = x_.rows;
    const std::int64_t f = hidden_.cols;
    const Index rows = leading_rows(t, 2 * f, ctx_.check_elements);
    const auto n = static_cast<std::int64_t>(rows.size());
    HostMat x = gather(gpu, x_, rows, all_of(x_.cols));
    HostMat w = download(gpu, w_);
    CpuBackend cpu;
    Comparison cmp;
    if (pass_ == Pass::Forward) {
      run();
      HostMat gate_up(n, 2 * f);
      HostMat hidden(n, f);
      cpu.gemm_swiglu_forward(gate_up.mat(), hidden.mat(), x.mat(), w.mat());
      cmp.add("gate_up", gather(gpu, gate_up_, rows, all_of(2 * f)), gate_up);
      cmp.add("hidden", gather(gpu, hidden_, rows, all_of(f)), hidden);
    } else {
      HostMat gate_up = gather(gpu, gate_up_, rows, all_of(2 * f));
      run();
      HostMat d_gate_up(n, 2 * f);
      HostMat d_hidden(n, f);
      cpu.gemm_swiglu_backward(d_gate_up.mat(), d_hidden.mat(), x.mat(), w.mat(), gate_up.mat());
      cmp.add("d_gate_up", gather(gpu, d_gate_up_, rows, all_of(2 * f)), d_gate_up);
    }
    return cmp.result(rows_scope(rows, t));
  }

 private:
  BenchContext& ctx_;
  DeviceBuffers buffers_;
  Pass pass_;
  bool in_epilogue_;
  Mat x_, w_, gate_up_, hidden_, d_gate_up_;
};

}  // namespace

std::unique_ptr<OpCase> make_swiglu_gemm(BenchContext& ctx, Pass pass, bool in_epilogue) {
  return std::make_unique<SwigluGemmCase>(ctx, pass, in_epilogue);
}

}  // namespace tinyllama::bench
