// The GEMMs of one block and the tied LM head, in the three passes the
// training step runs them (model_passes.cc):
//   forward     y[T, out]  = x[T, in] · W[out, in]ᵀ
//   input grad  dx[T, in]  = dy[T, out] · W[out, in]
//   weight grad dW[out, in] = dy[T, out]ᵀ · x[T, in]   (dW in the master dtype)
// The split form runs one GEMM per part of the output (q, k, v or gate, up)
// on row slices of the same weight; its input gradient accumulates the
// parts into dx (beta = 1 after the first), as unfused levels do.
#include <string>
#include <vector>

#include "bench/device_buffers.h"
#include "bench/reference.h"
#include "cpu/cpu_backend.h"
#include "ops/linear/bench_gemm.h"

namespace tinyllama::bench {
namespace {

// Output rows and columns a check compares, spread evenly so that they fall
// in different tiles of the GPU's GEMM; each gets its full reduction, so
// the CPU's work is 64 · 128 · K multiply-adds (K up to 32768 here).
constexpr std::int64_t kCheckRows = 64;
constexpr std::int64_t kCheckCols = 128;

struct LinearDims {
  std::int64_t in = 0;
  std::int64_t out = 0;
  std::vector<std::int64_t> parts;  // output widths of the split form
};

LinearDims dims_of(const ModelConfig& cfg, Linear linear) {
  const std::int64_t d = cfg.hidden_dim;
  const std::int64_t f = cfg.ffn_dim;
  switch (linear) {
    case Linear::Qkv:
      return {d, cfg.qkv_dim(), {cfg.q_dim(), cfg.kv_dim(), cfg.kv_dim()}};
    case Linear::OutProj:
      return {cfg.q_dim(), d, {d}};
    case Linear::GateUp:
      return {d, 2 * f, {f, f}};
    case Linear::Down:
      return {f, d, {d}};
    case Linear::LmHead:  // over the padded vocabulary, as the model runs it
      return {d, cfg.padded_vocab(), {cfg.padded_vocab()}};
  }
  return {};
}

class GemmCase final : public OpCase {
 public:
  GemmCase(BenchContext& ctx, Linear linear, GemmPass pass, bool split)
      : ctx_(ctx),
        buffers_(ctx.gpu, ctx.seed),
        dims_(dims_of(ctx.cfg, linear)),
        pass_(pass),
        split_(split && dims_.parts.size() > 1) {
    const std::int64_t t = ctx.tokens();
    const DType act = ctx.act();
    // Weights of the init's order of magnitude, activations and gradients
    // of order one: sums stay far from fp16's range limit.
    switch (pass) {
      case GemmPass::Forward:
        a_ = buffers_.random(t, dims_.in, act, -1, 1);              // x
        b_ = buffers_.random(dims_.out, dims_.in, act, -0.1, 0.1);  // W
        c_ = buffers_.poisoned(t, dims_.out, act);                  // y
        trans_b_ = true;
        break;
      case GemmPass::InputGrad:
        a_ = buffers_.random(t, dims_.out, act, -1, 1);             // dy
        b_ = buffers_.random(dims_.out, dims_.in, act, -0.1, 0.1);  // W
        c_ = buffers_.poisoned(t, dims_.in, act);                   // dx
        break;
      case GemmPass::WeightGrad:
        a_ = buffers_.random(t, dims_.out, act, -1, 1);             // dy
        b_ = buffers_.random(t, dims_.in, act, -1, 1);              // x
        c_ = buffers_.poisoned(dims_.out, dims_.in, ctx.master());  // dW
        trans_a_ = true;
        break;
    }
  }

  void run() override {
    Backend& gpu = ctx_.gpu;
    if (!split_) {
      gpu.gemm(c_, a_, trans_a_, b_, trans_b_, 1.0f, 0.0f);
      return;
    }
    std::int64_t at = 0;
    for (const std::int64_t width : dims_.parts) {
      switch (pass_) {
        case GemmPass::Forward:
          gpu.gemm(c_.col_block(at, width), a_, false, b_.row_block(at, width), true, 1.0f, 0.0f);
          break;
        case GemmPass::InputGrad:
          gpu.gemm(c_, a_.col_block(at, width), false, b_.row_block(at, width), false, 1.0f,
                   at == 0 ? 0.0f : 1.0f);
          break;
        case GemmPass::WeightGrad:
          gpu.gemm(c_.row_block(at, width), a_.col_block(at, width), true, b_, false, 1.0f, 0.0f);
          break;
      }
      at += width;
    }
  }

  // The reference computes the fused product whatever form the GPU ran:
  // the split parts add up to the same matrix.
  CheckResult check() override {
    Backend& gpu = ctx_.gpu;
    const Index rows = spread(c_.rows, kCheckRows);
    const Index cols = spread(c_.cols, kCheckCols);
    const std::int64_t k = trans_a_ ? a_.rows : a_.cols;
    // Rows of op(a) and columns of op(b), kept in their stored orientation.
    HostMat a = trans_a_ ? gather(gpu, a_, all_of(k), rows) : gather(gpu, a_, rows, all_of(k));
    HostMat b = trans_b_ ? gather(gpu, b_, cols, all_of(k)) : gather(gpu, b_, all_of(k), cols);
    run();
    HostMat want(static_cast<std::int64_t>(rows.size()), static_cast<std::int64_t>(cols.size()));
    CpuBackend cpu;
    cpu.gemm(want.mat(), a.mat(), trans_a_, b.mat(), trans_b_, 1.0f, 0.0f);
    Comparison cmp;
    cmp.add(pass_ == GemmPass::WeightGrad  ? "dW"
            : pass_ == GemmPass::InputGrad ? "dx"
                                           : "y",
            gather(gpu, c_, rows, cols), want);
    return cmp.result("output rows " + std::to_string(rows.size()) + "/" + std::to_string(c_.rows) +
                      " x columns " + std::to_string(cols.size()) + "/" + std::to_string(c_.cols) +
                      " (spread evenly), each summed over all " + std::to_string(k));
  }

 private:
  BenchContext& ctx_;
  DeviceBuffers buffers_;
  LinearDims dims_;
  GemmPass pass_;
  bool split_;
  // c = op(a) · op(b) in the fused form.
  Mat a_, b_, c_;
  bool trans_a_ = false;
  bool trans_b_ = false;
};

}  // namespace

std::unique_ptr<OpCase> make_gemm(BenchContext& ctx, Linear linear, GemmPass pass, bool split) {
  return std::make_unique<GemmCase>(ctx, linear, pass, split);
}

}  // namespace tinyllama::bench
