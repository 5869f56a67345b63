#pragma once
// The kernel families inside an op's implementation: which flash attention
// kernels, which SwiGLU GEMM schedule, which RMSNorm backward and loss
// kernels run. They are part of the resolved
// plan (StepPlan::kernels) like every other choice: resolve_kernels() decides
// them from the device's facts and the shapes, the CUDA dispatch runs what
// the plan says, and the kernel bench and the tests pin a family by asking
// for it in the plan (PlanRequest::kernel_pins), not by a process-wide
// setting.
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "model/config.h"

namespace tinyllama {

struct DeviceCaps;

// The flash forward's family (bf16 / fp16; fp32 has one kernel of its own).
// Mma: the Ampere-style kernel (mma.sync), on any device and head_dim. The
// others are Hopper kernels (wgmma, sm_90a build on a 9.0 device, head_dim
// 64 or 128). WgmmaWxK: W warpgroups (64 query rows each) per block, K keys
// per tile; PairedWxK: the W warpgroups take the same rows of W heads of one
// kv group (an even group only); OverlapWxK: the softmax overlapped with
// P V; SpecializedK: a TMA producer warpgroup and two wgmma consumers, K
// keys per tile; PingPongK: the consumers take turns at the tensor cores.
enum class FlashForwardKernel {
  Mma,
  Wgmma1x64,
  Wgmma1x128,
  Wgmma2x64,
  Wgmma2x128,
  Paired2x64,
  Paired2x128,
  Overlap1x64,
  Overlap2x64,
  Overlap2x128,
  Specialized64,
  Specialized128,
  PingPong64,
  PingPong128
};
// The flash backward's. Mma: mma.sync, anywhere. Wgmma: the dK/dV and dQ
// kernels on wgmma. Specialized: the dK/dV kernel warp-specialised (TMA
// producer, two wgmma consumers), dQ as in Wgmma. Fused: one
// warp-specialised kernel for dK, dV and dQ (five products per tile pair,
// not seven), dQ summed across key blocks in a fixed order into an fp32
// accumulator the attention scratch then holds. OneLaunch: Wgmma's two
// kernels as one grid, side by side (the dK/dV blocks compute D themselves).
enum class FlashBackwardKernel { Mma, Wgmma, Specialized, Fused, OneLaunch };
// Where the backward computes D = rowsum(dO * O): InDq in the dQ kernel's
// prologue, for its own query tile (two launches); Separate: a kernel of
// its own first (three). The same bits either way. Fused needs Separate.
enum class FlashDelta { InDq, Separate };
// The SwiGLU GEMM's schedule (SwigluImpl::Gemm): a persistent ping-pong
// kernel, or two blocks an SM.
enum class SwigluGemmKernel { PingPong, TwoBlocks };
// The RMSNorm backward's weight gradient: the blocks' partial rows summed by
// the kernel's last blocks where the grid is small enough
// (InKernelWhereSmall), else by a second kernel; or always by the second
// kernel (SecondKernel).
enum class NormWeightSum { InKernelWhereSmall, SecondKernel };
// The RMSNorm backward's long rows (more than 32 * 4 vectors): a team of
// warps a row (Teams), or the one-warp shared-memory kernel the team kernel
// replaced there (OneWarp).
enum class NormLongRows { Teams, OneWarp };
// The chunked loss kernel's rows: staged in shared memory (one DRAM read a
// row instead of two) where a row is long enough to gain (Auto), every row
// that fits (Staged), or none (Streamed).
enum class LossRows { Auto, Staged, Streamed };

struct KernelChoices {
  FlashForwardKernel flash_forward = FlashForwardKernel::Mma;
  FlashBackwardKernel flash_backward = FlashBackwardKernel::Mma;
  FlashDelta flash_delta = FlashDelta::InDq;
  SwigluGemmKernel swiglu_forward = SwigluGemmKernel::PingPong;
  SwigluGemmKernel swiglu_backward = SwigluGemmKernel::TwoBlocks;
  NormWeightSum norm_weight_sum = NormWeightSum::InKernelWhereSmall;
  NormLongRows norm_long_rows = NormLongRows::Teams;
  LossRows loss_rows = LossRows::Auto;
};
// Written out: the CUDA sources that include this header compile as C++17.
bool operator==(const KernelChoices& a, const KernelChoices& b);

// A family asked for instead of the default (the kernel bench, the tests).
// One that cannot run at the plan's shapes, precision or device is replaced
// by the one that would run in its place there (a Hopper family by Mma, a
// paired one by Wgmma2x64 when no two heads share a kv head).
struct KernelPins {
  std::optional<FlashForwardKernel> flash_forward;
  std::optional<FlashBackwardKernel> flash_backward;
  std::optional<FlashDelta> flash_delta;
  std::optional<SwigluGemmKernel> swiglu_gemm;  // both passes
  std::optional<NormWeightSum> norm_weight_sum;
  std::optional<NormLongRows> norm_long_rows;
  std::optional<LossRows> loss_rows;
};
bool operator==(const KernelPins& a, const KernelPins& b);

// The families a step at these shapes and this compute dtype runs: the
// kernel bench's fastest on the H100 where nothing is pinned.
KernelChoices resolve_kernels(const DeviceCaps& caps, const ModelConfig& cfg, BatchShape shape,
                              DType compute, const KernelPins& pins);

// Whether the Hopper flash kernels run at this head_dim and dtype on the
// device (its facts say whether the build and the device have them).
bool flash_hopper_runs(const DeviceCaps& caps, int head_dim, DType compute);

// "" when the SwiGLU GEMM kernels run this model in this dtype on the
// device, else why not.
std::string swiglu_gemm_unsupported(const DeviceCaps& caps, DType compute, std::int64_t hidden_dim,
                                    std::int64_t ffn_dim);

// The backward's dQ accumulator and counters (FlashBackwardKernel::Fused)
// are part of the attention scratch only when the plan runs it.
bool flash_backward_fused(const KernelChoices& k);

const char* kernel_name(FlashForwardKernel k);
const char* kernel_name(FlashBackwardKernel k);
const char* kernel_name(FlashDelta d);
const char* kernel_name(SwigluGemmKernel k);
const char* kernel_name(NormWeightSum s);
const char* kernel_name(NormLongRows r);
const char* kernel_name(LossRows r);

}  // namespace tinyllama
