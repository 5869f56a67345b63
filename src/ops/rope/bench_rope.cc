// The kernel bench's RoPE on the q and k heads of a qkv buffer (in place, a
// column block that leaves v out), as the attention half of a block runs it.
#include <string>

#include "bench/device_buffers.h"
#include "bench/reference.h"
#include "cpu/cpu_backend.h"
#include "ops/rope/bench_rope.h"

namespace tinyllama::bench {
namespace {

class RopeCase final : public OpCase {
 public:
  RopeCase(BenchContext& ctx, Pass pass) : ctx_(ctx), buffers_(ctx.gpu, ctx.seed), pass_(pass) {
    const ModelConfig& cfg = ctx.cfg;
    const Mat qkv = buffers_.random(ctx.tokens(), cfg.qkv_dim(), ctx.act(), -1, 1);
    // q and k heads sit side by side in qkv, so one call rotates both.
    x_ = qkv.col_block(0, cfg.q_dim() + cfg.kv_dim());
  }

  // In place: repeated runs keep rotating the same values (a rotation keeps
  // their size), which is all the timing needs.
  void run() override {
    const ModelConfig& cfg = ctx_.cfg;
    if (pass_ == Pass::Forward) {
      ctx_.gpu.rope_forward(x_, ctx_.batch.seq, cfg.head_dim(), cfg.rope_theta);
    } else {
      ctx_.gpu.rope_backward(x_, ctx_.batch.seq, cfg.head_dim(), cfg.rope_theta);
    }
  }

  // Whole leading sequences: rows keep their positions (row r is position
  // r % seq), and the reference takes whole sequences only.
  CheckResult check() override {
    Backend& gpu = ctx_.gpu;
    const ModelConfig& cfg = ctx_.cfg;
    const Index rows = leading_rows(x_.rows, x_.cols, ctx_.check_elements, ctx_.batch.seq);
    const Index cols = all_of(x_.cols);
    HostMat x = gather(gpu, x_, rows, cols);
    run();
    CpuBackend cpu;
    if (pass_ == Pass::Forward) {
      cpu.rope_forward(x.mat(), ctx_.batch.seq, cfg.head_dim(), cfg.rope_theta);
    } else {
      cpu.rope_backward(x.mat(), ctx_.batch.seq, cfg.head_dim(), cfg.rope_theta);
    }
    Comparison cmp;
    cmp.add(pass_ == Pass::Forward ? "q,k" : "dq,dk", gather(gpu, x_, rows, cols), x);
    return cmp.result(rows_scope(rows, x_.rows) + ", q and k heads");
  }

 private:
  BenchContext& ctx_;
  DeviceBuffers buffers_;
  Pass pass_;
  Mat x_;
};

}  // namespace

std::unique_ptr<OpCase> make_rope(BenchContext& ctx, Pass pass) {
  return std::make_unique<RopeCase>(ctx, pass);
}

}  // namespace tinyllama::bench
