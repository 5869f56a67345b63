#include "bench/op_registry.h"

#include <algorithm>

#include "bench/shapes.h"
#include "core/errors.h"
#include "ops/attention/bench_attention.h"
#include "ops/elementwise/bench_residual_add.h"
#include "ops/embedding/bench_embedding.h"
#include "ops/linear/bench_gemm.h"
#include "ops/loss/bench_loss.h"
#include "ops/norm/bench_norm.h"
#include "ops/optimizer/bench_adamw.h"
#include "ops/rope/bench_rope.h"
#include "ops/swiglu/bench_swiglu.h"

namespace tinyllama::bench {
namespace {

using Factory = std::function<std::unique_ptr<OpCase>(BenchContext&)>;

// A variant that pins one flash attention family through its plan.
KernelPins forward_pin(FlashForwardKernel kernel) {
  KernelPins pins;
  pins.flash_forward = kernel;
  return pins;
}

KernelPins backward_pin(FlashBackwardKernel kernel) {
  KernelPins pins;
  pins.flash_backward = kernel;
  return pins;
}

KernelPins delta_pin(FlashDelta delta) {
  KernelPins pins;
  pins.flash_delta = delta;
  return pins;
}

class Builder {
 public:
  void add(std::string op, std::string variant, std::string path, ImplChoice impl, Factory make) {
    OpVariant v;
    v.op = std::move(op);
    v.variant = std::move(variant);
    v.cost_path = std::move(path);
    v.impl = impl;
    v.make = std::move(make);
    entries_.push_back(std::move(v));
  }

  // One pass of a linear layer: the fused GEMM, and for the layers stored
  // fused (Wqkv, Wgu) the split form beside it.
  void gemm(Linear linear, GemmPass pass) {
    const char* name = "";
    std::string layer = "layer0/";
    ImplChoice split;
    bool splits = false;
    switch (linear) {
      case Linear::Qkv:
        name = "qkv_gemm";
        split.fused_qkv = false;
        splits = true;
        break;
      case Linear::OutProj:
        name = "out_proj_gemm";
        break;
      case Linear::GateUp:
        name = "gate_up_gemm";
        split.fused_ffn = false;
        splits = true;
        break;
      case Linear::Down:
        name = "down_gemm";
        break;
      case Linear::LmHead:
        name = "lm_head_gemm";
        layer = "";
        break;
    }
    std::string op = name;
    std::string path;
    switch (pass) {
      case GemmPass::Forward:
        op += ".fwd";
        path = "forward/" + layer + name;
        break;
      case GemmPass::InputGrad:
        op += ".dgrad";
        path = "backward/" + layer + name + "_dgrad";
        break;
      case GemmPass::WeightGrad:
        op += ".wgrad";
        path = "backward/" + layer + name + "_wgrad";
        break;
    }
    add(op, splits ? "fused" : "", path, ImplChoice{},
        [=](BenchContext& c) { return make_gemm(c, linear, pass, false); });
    if (splits) {
      add(op, "split", path, split,
          [=](BenchContext& c) { return make_gemm(c, linear, pass, true); });
    }
  }

  // One pass of attention in one implementation. A variant the device
  // cannot run at a shape is skipped with resolve_plan's reason.
  void attention(Pass pass, const char* variant, ImplChoice impl, const KernelPins& pins = {}) {
    const bool fwd = pass == Pass::Forward;
    impl.kernels = pins;
    add(fwd ? "attention.fwd" : "attention.bwd", variant,
        fwd ? "forward/layer0/attention" : "backward/layer0/attention", impl, [=](BenchContext& c) {
          return make_attention(c, pass, impl.attention, pins, impl.fused_rope);
        });
  }

  std::vector<OpVariant> take() { return std::move(entries_); }

 private:
  std::vector<OpVariant> entries_;
};

// The implementation choices the registry's variants run with (v2's
// defaults, and each one changed from them).
struct Choices {
  ImplChoice v2;
  ImplChoice materialised;
  ImplChoice cudnn;
  ImplChoice unfused_ffn;
  ImplChoice per_tensor;
  ImplChoice fused_norm;
  ImplChoice chunked_loss;
  ImplChoice fused_rope;
  ImplChoice recompute_norms;
  ImplChoice swiglu_gemm;
  ImplChoice swiglu_pingpong;  // swiglu_gemm with each schedule pinned
  ImplChoice swiglu_two_blocks;
  ImplChoice scan_embedding_grad;
  // What the current kernels replaced, pinned in the plan beside them.
  ImplChoice norm_second_kernel;  // the norm's weight gradient summed by a second kernel
  ImplChoice norm_one_warp;       // long rows on the one-warp kernel, not the team kernel
  ImplChoice fused_norm_one_warp;
  ImplChoice loss_staged;  // the chunked loss: every row that fits staged, or none
  ImplChoice loss_streamed;
};

Choices choices() {
  Choices c;
  c.materialised.attention = AttentionImpl::Materialized;
  c.cudnn.attention = AttentionImpl::Cudnn;
  c.unfused_ffn.fused_ffn = false;
  c.per_tensor.fused_optimizer = false;
  c.fused_norm.fused_norm = true;
  c.chunked_loss.chunked_loss = true;
  c.fused_rope.fused_rope = true;
  c.recompute_norms.recompute_norms = true;
  c.swiglu_gemm.swiglu_gemm = true;
  c.swiglu_pingpong = c.swiglu_two_blocks = c.swiglu_gemm;
  c.swiglu_pingpong.kernels.swiglu_gemm = SwigluGemmKernel::PingPong;
  c.swiglu_two_blocks.kernels.swiglu_gemm = SwigluGemmKernel::TwoBlocks;
  c.scan_embedding_grad.sorted_embedding_grad = false;
  c.norm_second_kernel.kernels.norm_weight_sum = NormWeightSum::SecondKernel;
  c.norm_one_warp.kernels.norm_long_rows = NormLongRows::OneWarp;
  c.fused_norm_one_warp = c.fused_norm;
  c.fused_norm_one_warp.kernels.norm_long_rows = NormLongRows::OneWarp;
  c.loss_staged = c.loss_streamed = c.chunked_loss;
  c.loss_staged.kernels.loss_rows = LossRows::Staged;
  c.loss_streamed.kernels.loss_rows = LossRows::Streamed;
  return c;
}

// The forward pass's attention in each implementation and kernel family.
void forward_attention(Builder& b, const Choices& with) {
  const Pass fwd = Pass::Forward;
  b.attention(fwd, "materialized", with.materialised);
  b.attention(fwd, "flash", with.v2);
  // RoPE's rotation as the flash kernels load q and k (rope fused): time it
  // against flash plus rope.fwd.
  b.attention(fwd, "flash+rope", with.fused_rope);
  // Our forward's kernel families pinned (flash: the best the device runs).
  b.attention(fwd, "flash-mma", with.v2, forward_pin(FlashForwardKernel::Mma));
  // wgWxK: W warpgroups of 64 query rows per block, K keys per tile.
  b.attention(fwd, "flash-wg1x64", with.v2, forward_pin(FlashForwardKernel::Wgmma1x64));
  b.attention(fwd, "flash-wg1x128", with.v2, forward_pin(FlashForwardKernel::Wgmma1x128));
  b.attention(fwd, "flash-wg2x64", with.v2, forward_pin(FlashForwardKernel::Wgmma2x64));
  b.attention(fwd, "flash-wg2x128", with.v2, forward_pin(FlashForwardKernel::Wgmma2x128));
  // pairWxK: the warpgroups take W heads of one kv group (shared K/V tiles).
  b.attention(fwd, "flash-pair2x64", with.v2, forward_pin(FlashForwardKernel::Paired2x64));
  b.attention(fwd, "flash-pair2x128", with.v2, forward_pin(FlashForwardKernel::Paired2x128));
  // ovWxK: the same with the softmax overlapped with P V.
  b.attention(fwd, "flash-ov1x64", with.v2, forward_pin(FlashForwardKernel::Overlap1x64));
  b.attention(fwd, "flash-ov2x64", with.v2, forward_pin(FlashForwardKernel::Overlap2x64));
  b.attention(fwd, "flash-ov2x128", with.v2, forward_pin(FlashForwardKernel::Overlap2x128));
  // wsK: a TMA producer warpgroup and two wgmma consumers, K keys per tile.
  b.attention(fwd, "flash-ws64", with.v2, forward_pin(FlashForwardKernel::Specialized64));
  b.attention(fwd, "flash-ws128", with.v2, forward_pin(FlashForwardKernel::Specialized128));
  // wsppK: the same with the consumers taking turns at the tensor cores.
  b.attention(fwd, "flash-wspp64", with.v2, forward_pin(FlashForwardKernel::PingPong64));
  b.attention(fwd, "flash-wspp128", with.v2, forward_pin(FlashForwardKernel::PingPong128));
  b.attention(fwd, "cudnn", with.cudnn);
}

// The forward pass.
void forward_ops(Builder& b, const Choices& with) {
  const Pass fwd = Pass::Forward;
  b.add("embedding.fwd", "", "forward/embedding", with.v2,
        [=](BenchContext& c) { return make_embedding(c, fwd); });
  b.add("rmsnorm.fwd", "", "forward/layer0/attn_norm", with.v2,
        [=](BenchContext& c) { return make_rmsnorm(c, fwd); });
  b.gemm(Linear::Qkv, GemmPass::Forward);
  b.add("rope.fwd", "", "forward/layer0/rope", with.v2,
        [=](BenchContext& c) { return make_rope(c, fwd); });
  forward_attention(b, with);
  b.gemm(Linear::OutProj, GemmPass::Forward);
  b.add("residual_add", "", "forward/layer0/attn_residual", with.v2,
        [](BenchContext& c) { return make_residual_add(c); });
  b.add("residual_norm.fwd", "fused", "forward/layer0/attn_residual_norm", with.fused_norm,
        [=](BenchContext& c) { return make_residual_norm(c, fwd); });
  b.gemm(Linear::GateUp, GemmPass::Forward);
  b.add("swiglu.fwd", "fused", "forward/layer0/swiglu", with.v2,
        [=](BenchContext& c) { return make_swiglu(c, fwd, true); });
  b.add("swiglu.fwd", "silu+mul", "forward/layer0/swiglu", with.unfused_ffn,
        [=](BenchContext& c) { return make_swiglu(c, fwd, false); });
  // The gate/up GEMM and the SwiGLU: cuBLASLt then the kernel, against one
  // kernel with the SwiGLU in its epilogue (swiglu gemm).
  b.add("gate_up+swiglu.fwd", "gemm+fused", "forward/layer0/gate_up_gemm", with.swiglu_gemm,
        [=](BenchContext& c) { return make_swiglu_gemm(c, fwd, false); });
  b.add("gate_up+swiglu.fwd", "epilogue", "forward/layer0/gate_up_gemm", with.swiglu_gemm,
        [=](BenchContext& c) { return make_swiglu_gemm(c, fwd, true); });
  b.add("gate_up+swiglu.fwd", "epilogue-pingpong", "forward/layer0/gate_up_gemm",
        with.swiglu_pingpong, [=](BenchContext& c) { return make_swiglu_gemm(c, fwd, true); });
  b.add("gate_up+swiglu.fwd", "epilogue-2blocks", "forward/layer0/gate_up_gemm",
        with.swiglu_two_blocks, [=](BenchContext& c) { return make_swiglu_gemm(c, fwd, true); });
  b.gemm(Linear::Down, GemmPass::Forward);
  b.gemm(Linear::LmHead, GemmPass::Forward);
  b.add("cross_entropy.fwd", "", "forward/cross_entropy", with.v2,
        [=](BenchContext& c) { return make_cross_entropy(c, fwd); });
  b.add("cross_entropy.fused", "", "forward/cross_entropy", with.chunked_loss,
        [](BenchContext& c) { return make_cross_entropy_fused(c); });
  b.add("cross_entropy.fused", "staged", "forward/cross_entropy", with.loss_staged,
        [](BenchContext& c) { return make_cross_entropy_fused(c); });
  b.add("cross_entropy.fused", "streamed", "forward/cross_entropy", with.loss_streamed,
        [](BenchContext& c) { return make_cross_entropy_fused(c); });
}

// The backward pass from the loss to the attention block's norm.
void backward_head_and_ffn_ops(Builder& b, const Choices& with) {
  const Pass bwd = Pass::Backward;
  b.add("cross_entropy.bwd", "", "backward/cross_entropy", with.v2,
        [=](BenchContext& c) { return make_cross_entropy(c, bwd); });
  b.gemm(Linear::LmHead, GemmPass::InputGrad);
  b.gemm(Linear::LmHead, GemmPass::WeightGrad);
  b.gemm(Linear::Down, GemmPass::InputGrad);
  b.gemm(Linear::Down, GemmPass::WeightGrad);
  b.add("swiglu.bwd", "fused", "backward/layer0/swiglu", with.v2,
        [=](BenchContext& c) { return make_swiglu(c, bwd, true); });
  b.add("swiglu.bwd", "silu+mul", "backward/layer0/swiglu", with.unfused_ffn,
        [=](BenchContext& c) { return make_swiglu(c, bwd, false); });
  b.add("down_dgrad+swiglu.bwd", "gemm+fused", "backward/layer0/down_gemm_dgrad", with.swiglu_gemm,
        [=](BenchContext& c) { return make_swiglu_gemm(c, bwd, false); });
  b.add("down_dgrad+swiglu.bwd", "epilogue", "backward/layer0/down_gemm_dgrad", with.swiglu_gemm,
        [=](BenchContext& c) { return make_swiglu_gemm(c, bwd, true); });
  b.add("down_dgrad+swiglu.bwd", "epilogue-pingpong", "backward/layer0/down_gemm_dgrad",
        with.swiglu_pingpong, [=](BenchContext& c) { return make_swiglu_gemm(c, bwd, true); });
  b.add("down_dgrad+swiglu.bwd", "epilogue-2blocks", "backward/layer0/down_gemm_dgrad",
        with.swiglu_two_blocks, [=](BenchContext& c) { return make_swiglu_gemm(c, bwd, true); });
  b.gemm(Linear::GateUp, GemmPass::InputGrad);
  b.gemm(Linear::GateUp, GemmPass::WeightGrad);
  b.add("rmsnorm.bwd", "", "backward/layer0/ffn_norm", with.v2,
        [=](BenchContext& c) { return make_rmsnorm(c, bwd); });
  b.add("rmsnorm.bwd", "separate-sum", "backward/layer0/ffn_norm", with.norm_second_kernel,
        [=](BenchContext& c) { return make_rmsnorm(c, bwd); });
  b.add("rmsnorm.bwd", "one-warp", "backward/layer0/ffn_norm", with.norm_one_warp,
        [=](BenchContext& c) { return make_rmsnorm(c, bwd); });
  b.add("rmsnorm.apply", "recompute", "backward/layer0/ffn_norm_recompute", with.recompute_norms,
        [](BenchContext& c) { return make_rmsnorm_apply(c); });
  b.add("residual_norm.bwd", "fused", "backward/layer0/ffn_residual_norm", with.fused_norm,
        [=](BenchContext& c) { return make_residual_norm(c, bwd); });
  b.add("residual_norm.bwd", "one-warp", "backward/layer0/ffn_residual_norm",
        with.fused_norm_one_warp, [=](BenchContext& c) { return make_residual_norm(c, bwd); });
}

// The backward pass from the output projection to the embedding.
void backward_attention_ops(Builder& b, const Choices& with) {
  const Pass bwd = Pass::Backward;
  b.gemm(Linear::OutProj, GemmPass::InputGrad);
  b.gemm(Linear::OutProj, GemmPass::WeightGrad);
  b.attention(bwd, "materialized", with.materialised);
  b.attention(bwd, "flash", with.v2);
  b.attention(bwd, "flash-mma", with.v2, backward_pin(FlashBackwardKernel::Mma));
  b.attention(bwd, "flash-wgmma", with.v2, backward_pin(FlashBackwardKernel::Wgmma));
  b.attention(bwd, "flash-ws", with.v2, backward_pin(FlashBackwardKernel::Specialized));
  b.attention(bwd, "flash-one-launch", with.v2, backward_pin(FlashBackwardKernel::OneLaunch));
  b.attention(bwd, "flash-fused", with.v2, backward_pin(FlashBackwardKernel::Fused));
  b.attention(bwd, "flash-delta-separate", with.v2, delta_pin(FlashDelta::Separate));
  b.attention(bwd, "cudnn", with.cudnn);
  // RoPE's backward rotation in the flash kernels' epilogues (rope fused):
  // time it against flash plus rope.bwd.
  b.attention(bwd, "flash+rope", with.fused_rope);
  b.add("rope.bwd", "", "backward/layer0/rope", with.v2,
        [=](BenchContext& c) { return make_rope(c, bwd); });
  b.gemm(Linear::Qkv, GemmPass::InputGrad);
  b.gemm(Linear::Qkv, GemmPass::WeightGrad);
  // Each gradient kernel on uniform tokens and on text-like skewed ones
  // (Zipf): the scan kernel's cost follows the commonest token's count.
  b.add("embedding.bwd", "scan", "backward/embedding", with.scan_embedding_grad,
        [=](BenchContext& c) { return make_embedding(c, bwd); });
  b.add("embedding.bwd", "sorted", "backward/embedding", with.v2,
        [=](BenchContext& c) { return make_embedding(c, bwd); });
  b.add("embedding.bwd", "scan-zipf", "backward/embedding", with.scan_embedding_grad,
        [=](BenchContext& c) { return make_embedding(c, bwd, true); });
  b.add("embedding.bwd", "sorted-zipf", "backward/embedding", with.v2,
        [=](BenchContext& c) { return make_embedding(c, bwd, true); });
}

// Optimizer: layer 0's parameters.
void optimizer_ops(Builder& b, const Choices& with) {
  b.add("adamw", "per-tensor", kLayerAdamwPath, with.per_tensor,
        [](BenchContext& c) { return make_adamw(c, false); });
  b.add("adamw", "fused", kLayerAdamwPath, with.v2,
        [](BenchContext& c) { return make_adamw(c, true); });
}

std::vector<OpVariant> build_registry() {
  const Choices with = choices();
  Builder b;
  forward_ops(b, with);
  backward_head_and_ffn_ops(b, with);
  backward_attention_ops(b, with);
  optimizer_ops(b, with);
  return b.take();
}

std::vector<std::string> families() {
  std::vector<std::string> out;
  for (const OpVariant& v : registry()) {
    if (std::find(out.begin(), out.end(), v.family()) == out.end()) out.push_back(v.family());
  }
  return out;
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const std::string& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

bool names(const OpVariant& v, const std::string& name) {
  if (name == v.op || name == v.family()) return true;
  return name == "gemm" && v.family().size() > 5 &&
         v.family().compare(v.family().size() - 5, 5, "_gemm") == 0;
}

}  // namespace

std::string OpVariant::family() const {
  return op.substr(0, op.find('.'));
}

std::string OpVariant::label() const {
  return variant.empty() ? op : op + " " + variant;
}

const std::vector<OpVariant>& registry() {
  static const std::vector<OpVariant> entries = build_registry();
  return entries;
}

std::vector<const OpVariant*> select_ops(const std::string& list) {
  const std::vector<OpVariant>& all = registry();
  std::vector<bool> chosen(all.size(), false);
  bool any_item = false;
  for (const std::string& item : split_list(list)) {
    any_item = true;
    const std::size_t colon = item.find(':');
    const std::string name = item.substr(0, colon);
    const std::string variant = colon == std::string::npos ? "" : item.substr(colon + 1);
    bool named = false;
    bool matched = false;
    std::vector<std::string> variants;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (!names(all[i], name)) continue;
      named = true;
      if (!all[i].variant.empty()) variants.push_back(all[i].variant);
      if (colon == std::string::npos || all[i].variant == variant) {
        chosen[i] = true;
        matched = true;
      }
    }
    if (!named) {
      throw UsageError("--ops " + list + ": no op '" + name + "'; expected a family (" +
                       joined(families()) +
                       "), one pass of it (e.g. attention.fwd), gemm, or any of these with "
                       ":variant (e.g. attention.fwd:flash)");
    }
    if (!matched) {
      std::sort(variants.begin(), variants.end());
      variants.erase(std::unique(variants.begin(), variants.end()), variants.end());
      throw UsageError("--ops " + list + ": '" + name + "' has no variant '" + variant + "'" +
                       (variants.empty() ? std::string("; it has one implementation")
                                         : "; its variants: " + joined(variants)));
    }
  }
  if (!any_item) throw UsageError("--ops " + list + ": expected a comma-separated list of ops");
  std::vector<const OpVariant*> out;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (chosen[i]) out.push_back(&all[i]);
  }
  return out;
}

const std::vector<std::pair<std::string, std::string>>& ops_measured_elsewhere() {
  static const std::vector<std::pair<std::string, std::string>> list = {
      {"forward/ffn_norm", "rmsnorm.fwd (the same kernel at the same shape)"},
      {"forward/final_norm", "rmsnorm.fwd (the same kernel at the same shape)"},
      {"backward/attn_norm", "rmsnorm.bwd (the same kernel at the same shape)"},
      {"backward/final_norm", "rmsnorm.bwd (the same kernel at the same shape)"},
      {"forward/ffn_residual", "residual_add (the same kernel at the same shape)"},
      {"backward/attn_residual", "residual_add (the same kernel at the same shape)"},
      {"backward/ffn_residual", "residual_add (the same kernel at the same shape)"},
      {"forward/lm_head_gemm_wgrad",
       "lm_head_gemm.wgrad (the same GEMM, per chunk of rows under loss=chunked)"},
      {"forward/lm_head_gemm_dgrad",
       "lm_head_gemm.dgrad (the same GEMM, per chunk of rows under loss=chunked)"},
      {"forward/ffn_residual_norm", "residual_norm.fwd (the same kernel at the same shape)"},
      {"backward/attn_residual_norm", "residual_norm.bwd (the same kernel at the same shape)"},
      {"backward/attn_norm_recompute", "rmsnorm.apply (the same kernel at the same shape)"},
      {"optimizer/adamw", "adamw (layer 0's parameters; the other spans sweep the same kernel)"},
      {"optimizer/refresh_weights", "adamw per-tensor (its convert of the layer's weights)"},
      {"backward/overflow_check", "not benched: fp16 loss scaling's scan of the gradients"},
  };
  return list;
}

}  // namespace tinyllama::bench
