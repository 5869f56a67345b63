// AdamW over layer 0's parameters (one contiguous span of the flat state,
// ParamLayout::layer_span), the two ways the optimizer runs:
//  * per tensor: one adamw call per parameter tensor, then (AMP) one
//    convert of the span into the compute copy, as the unfused optimizer
//    and its weight refresh do;
//  * fused: one adamw_fused sweep over the span that also writes the
//    compute copy, as each layer's update during the v2 backward pass.
#include <algorithm>
#include <string>
#include <vector>

#include "bench/device_buffers.h"
#include "bench/reference.h"
#include "cpu/cpu_backend.h"
#include "model/param_layout.h"
#include "ops/optimizer/bench_adamw.h"

namespace tinyllama::bench {
namespace {

// Elements of each parameter tensor a check compares (from its start).
constexpr std::int64_t kCheckedPerTensor = std::int64_t{1} << 16;

struct Piece {
  std::int64_t offset = 0;  // elements from the span's start
  std::int64_t numel = 0;
};

class AdamWCase final : public OpCase {
 public:
  AdamWCase(BenchContext& ctx, bool fused) : ctx_(ctx), buffers_(ctx.gpu, ctx.seed), fused_(fused) {
    const ParamLayout layout(ctx.cfg);
    const ParamSpan span = layout.layer_span(0);
    for (const ParamSlot& s : layout.slots()) {
      if (s.offset >= span.begin && s.offset < span.end) {
        pieces_.push_back({s.offset - span.begin, s.numel()});
      }
    }
    const std::int64_t n = span.size();
    const DType m = ctx.master();
    // Random everywhere, the slots' alignment padding included: the sweep
    // updates the padding too, and only the tensors are compared.
    param_ = buffers_.random(1, n, m, -0.05, 0.05);
    grad_ = buffers_.random(1, n, m, -1e-2, 1e-2);
    m_ = buffers_.random(1, n, m, -1e-3, 1e-3);
    v_ = buffers_.random(1, n, m, 1e-8, 1e-5);  // a second moment is never negative
    if (ctx.precision.mixed()) copy_ = buffers_.poisoned(1, n, ctx.act());
    hyper_.step = 10;  // past the first steps' large bias corrections
  }

  // Repeated runs keep updating the same state, as successive steps would.
  void run() override {
    Backend& gpu = ctx_.gpu;
    if (fused_) {
      gpu.adamw_fused(param_, grad_, m_, v_, copy_, hyper_);
      return;
    }
    for (const Piece& p : pieces_) {
      gpu.adamw(piece(param_, p), piece(grad_, p), piece(m_, p), piece(v_, p), hyper_);
    }
    if (!copy_.empty()) gpu.convert(copy_, param_);
  }

  CheckResult check() override {
    Backend& gpu = ctx_.gpu;
    const std::int64_t per_tensor = std::min(kCheckedPerTensor, ctx_.check_elements);
    Index cols;
    for (const Piece& p : pieces_) {
      cols = merged(cols, range_of(p.offset, p.offset + std::min(p.numel, per_tensor)));
    }
    const Index row{0};
    HostMat param = gather(gpu, param_, row, cols);
    HostMat grad = gather(gpu, grad_, row, cols);
    HostMat m = gather(gpu, m_, row, cols);
    HostMat v = gather(gpu, v_, row, cols);
    run();
    // Elementwise, so the gathered elements form a valid block of their own.
    CpuBackend cpu;
    cpu.adamw(param.mat(), grad.mat(), m.mat(), v.mat(), hyper_);
    Comparison cmp;
    cmp.add("param", gather(gpu, param_, row, cols), param);
    cmp.add("m", gather(gpu, m_, row, cols), m);
    cmp.add("v", gather(gpu, v_, row, cols), v);
    if (!copy_.empty()) cmp.add("compute copy", gather(gpu, copy_, row, cols), param);
    return cmp.result("the first " + std::to_string(per_tensor) +
                      " elements of each of the layer's " + std::to_string(pieces_.size()) +
                      " tensors (all of a smaller one)");
  }

 private:
  static Mat piece(const Mat& block, const Piece& p) {
    return Mat(static_cast<char*>(block.data) +
                   p.offset * static_cast<std::int64_t>(dtype_size(block.dtype)),
               block.dtype, 1, p.numel);
  }

  BenchContext& ctx_;
  DeviceBuffers buffers_;
  bool fused_;
  std::vector<Piece> pieces_;
  Mat param_, grad_, m_, v_, copy_;
  AdamWHyper hyper_;
};

}  // namespace

std::unique_ptr<OpCase> make_adamw(BenchContext& ctx, bool fused) {
  return std::make_unique<AdamWCase>(ctx, fused);
}

}  // namespace tinyllama::bench
