// The rules behind the kernel families a plan runs (kernel_choices.h), with
// the measurements they come from.
#include "model/kernel_choices.h"

#include "model/step_plan.h"

namespace tinyllama {
namespace {

bool sixteen_bit(DType t) {
  return t == DType::BF16 || t == DType::F16;
}

// Whether the one-launch backward runs by default. In two launches each
// kernel's last wave leaves SMs idle and their latencies add up; one grid
// fills those gaps. What one launch costs: every block takes the dK/dV
// role's registers and shared memory, and the dK/dV blocks sum D
// themselves. The kernel bench (docs/log/2026-11-27.md, H100 and H200)
// draws the line:
//  * head_dim 64: where both roles' blocks together are at most
//    kOneLaunchBlocksPerSm per SM. 4-25 % faster than the two wgmma
//    kernels up to 1536 blocks (B8 S128 to S1024, B32 S256, GQA 2 and MHA),
//    6-12 % slower from 3072 (B32 S512, B32 S1024, 1 B).
//  * head_dim 128 (against the warp-specialised dK/dV): where the dK/dV
//    blocks alone are at most one per SM (few kv heads: GQA 3-4 at short
//    sequences or small batches), 2-22 % faster; with 256 dK/dV blocks
//    (MHA at B16 S128 and B8 S256, GQA 4 at B4 S2048) 19-46 % slower.
// DeviceCaps::flash_one_launch off (TINYLLAMA_FLASH_ONE_LAUNCH=off) keeps
// the two launches everywhere (the A/B runs of that section).
constexpr long long kOneLaunchBlocksPerSm = 12;
bool one_launch_by_default(const DeviceCaps& caps, const ModelConfig& cfg, BatchShape shape) {
  if (!caps.flash_one_launch || caps.sm_count <= 0) return false;
  const long long tiles = (shape.seq + 63) / 64;
  const long long sms = caps.sm_count;
  if (cfg.head_dim() == 128) return tiles * cfg.num_kv_heads * shape.batch <= sms;
  return tiles * (cfg.num_heads + cfg.num_kv_heads) * shape.batch <= kOneLaunchBlocksPerSm * sms;
}

// The kernel bench's fastest (H100, docs/PERFORMANCE.md): at hd 128 the
// warp-specialised kernel with its consumers taking turns (2026-11-24); at
// hd 64 one warpgroup per block, ahead of the pair of heads sharing K/V
// tiles at every shape measured on 2026-11-25 (S 128 to 1024, GQA 2 and
// the 1 B config's), by 1-14 %.
FlashForwardKernel default_forward(int head_dim) {
  return head_dim == 128 ? FlashForwardKernel::PingPong128 : FlashForwardKernel::Wgmma1x64;
}

FlashForwardKernel forward_kernel(const DeviceCaps& caps, const ModelConfig& cfg, DType compute,
                                  const KernelPins& pins) {
  if (!flash_hopper_runs(caps, cfg.head_dim(), compute)) return FlashForwardKernel::Mma;
  const FlashForwardKernel k = pins.flash_forward.value_or(default_forward(cfg.head_dim()));
  const bool paired = k == FlashForwardKernel::Paired2x64 || k == FlashForwardKernel::Paired2x128;
  const int group = cfg.num_heads / cfg.num_kv_heads;
  if (paired && group % 2 != 0) return FlashForwardKernel::Wgmma2x64;  // no two heads share kv
  return k;
}

// The kernel bench's faster (2026-11-24, H100): the warp-specialised dK/dV
// at hd 128, the one-warpgroup kernels at hd 64; both roles in one launch
// where two launches cannot fill the GPU.
FlashBackwardKernel backward_kernel(const DeviceCaps& caps, const ModelConfig& cfg,
                                    BatchShape shape, DType compute, const KernelPins& pins) {
  if (!flash_hopper_runs(caps, cfg.head_dim(), compute)) return FlashBackwardKernel::Mma;
  if (pins.flash_backward) return *pins.flash_backward;
  if (one_launch_by_default(caps, cfg, shape)) return FlashBackwardKernel::OneLaunch;
  return cfg.head_dim() == 128 ? FlashBackwardKernel::Specialized : FlashBackwardKernel::Wgmma;
}

}  // namespace

bool flash_hopper_runs(const DeviceCaps& caps, int head_dim, DType compute) {
  return caps.no_hopper_kernels.empty() && sixteen_bit(compute) &&
         (head_dim == 64 || head_dim == 128);
}

std::string swiglu_gemm_unsupported(const DeviceCaps& caps, DType compute, std::int64_t hidden_dim,
                                    std::int64_t ffn_dim) {
  if (caps.kind != DeviceKind::Cuda) return "";  // the CPU composes the GEMM and the SwiGLU
  if (!caps.no_hopper_kernels.empty()) return caps.no_hopper_kernels;
  if (!sixteen_bit(compute)) return "bf16 or fp16 only";
  if (ffn_dim % 64 != 0) return "the FFN width must be a multiple of 64";
  if (hidden_dim % 8 != 0) return "the hidden width must be a multiple of 8";
  return "";
}

KernelChoices resolve_kernels(const DeviceCaps& caps, const ModelConfig& cfg, BatchShape shape,
                              DType compute, const KernelPins& pins) {
  KernelChoices k;
  k.flash_forward = forward_kernel(caps, cfg, compute, pins);
  k.flash_backward = backward_kernel(caps, cfg, shape, compute, pins);
  k.flash_delta = pins.flash_delta.value_or(FlashDelta::InDq);
  // The fused kernel reads D from the delta kernel, which zeroes its counters.
  if (k.flash_backward == FlashBackwardKernel::Fused) k.flash_delta = FlashDelta::Separate;
  // The kernel bench's faster of the two each way (H100): the forward's
  // epilogue (writes only) hides under the ping-pong kernel's products; the
  // backward's (reads and writes) ran faster with two blocks an SM at every
  // shape measured.
  if (pins.swiglu_gemm) k.swiglu_forward = k.swiglu_backward = *pins.swiglu_gemm;
  k.norm_weight_sum = pins.norm_weight_sum.value_or(NormWeightSum::InKernelWhereSmall);
  k.norm_long_rows = pins.norm_long_rows.value_or(NormLongRows::Teams);
  // TINYLLAMA_CE_STAGED_ROWS=off (DeviceCaps::loss_staged_rows): the
  // streamed kernel where Auto would stage (A/B runs).
  k.loss_rows =
      pins.loss_rows.value_or(caps.loss_staged_rows ? LossRows::Auto : LossRows::Streamed);
  return k;
}

bool flash_backward_fused(const KernelChoices& k) {
  return k.flash_backward == FlashBackwardKernel::Fused;
}

bool operator==(const KernelChoices& a, const KernelChoices& b) {
  return a.flash_forward == b.flash_forward && a.flash_backward == b.flash_backward &&
         a.flash_delta == b.flash_delta && a.swiglu_forward == b.swiglu_forward &&
         a.swiglu_backward == b.swiglu_backward && a.norm_weight_sum == b.norm_weight_sum &&
         a.norm_long_rows == b.norm_long_rows && a.loss_rows == b.loss_rows;
}

bool operator==(const KernelPins& a, const KernelPins& b) {
  return a.flash_forward == b.flash_forward && a.flash_backward == b.flash_backward &&
         a.flash_delta == b.flash_delta && a.swiglu_gemm == b.swiglu_gemm &&
         a.norm_weight_sum == b.norm_weight_sum && a.norm_long_rows == b.norm_long_rows &&
         a.loss_rows == b.loss_rows;
}

const char* kernel_name(FlashForwardKernel k) {
  switch (k) {
    case FlashForwardKernel::Mma:
      return "mma";
    case FlashForwardKernel::Wgmma1x64:
      return "wgmma1x64";
    case FlashForwardKernel::Wgmma1x128:
      return "wgmma1x128";
    case FlashForwardKernel::Wgmma2x64:
      return "wgmma2x64";
    case FlashForwardKernel::Wgmma2x128:
      return "wgmma2x128";
    case FlashForwardKernel::Paired2x64:
      return "paired2x64";
    case FlashForwardKernel::Paired2x128:
      return "paired2x128";
    case FlashForwardKernel::Overlap1x64:
      return "overlap1x64";
    case FlashForwardKernel::Overlap2x64:
      return "overlap2x64";
    case FlashForwardKernel::Overlap2x128:
      return "overlap2x128";
    case FlashForwardKernel::Specialized64:
      return "ws64";
    case FlashForwardKernel::Specialized128:
      return "ws128";
    case FlashForwardKernel::PingPong64:
      return "pingpong64";
    case FlashForwardKernel::PingPong128:
      return "pingpong128";
  }
  return "?";
}

const char* kernel_name(FlashBackwardKernel k) {
  switch (k) {
    case FlashBackwardKernel::Mma:
      return "mma";
    case FlashBackwardKernel::Wgmma:
      return "wgmma";
    case FlashBackwardKernel::Specialized:
      return "ws";
    case FlashBackwardKernel::Fused:
      return "fused";
    case FlashBackwardKernel::OneLaunch:
      return "onelaunch";
  }
  return "?";
}

const char* kernel_name(FlashDelta d) {
  return d == FlashDelta::Separate ? "separate" : "in_dq";
}

const char* kernel_name(SwigluGemmKernel k) {
  return k == SwigluGemmKernel::TwoBlocks ? "two_blocks" : "pingpong";
}

const char* kernel_name(NormWeightSum s) {
  return s == NormWeightSum::SecondKernel ? "second_kernel" : "in_kernel_where_small";
}

const char* kernel_name(NormLongRows r) {
  return r == NormLongRows::OneWarp ? "one_warp" : "teams";
}

const char* kernel_name(LossRows r) {
  return r == LossRows::Staged ? "staged" : r == LossRows::Streamed ? "streamed" : "auto";
}

}  // namespace tinyllama
