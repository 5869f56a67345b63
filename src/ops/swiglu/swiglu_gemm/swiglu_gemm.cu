// The host side of the SwiGLU GEMMs (swiglu_gemm.h): operand checks, the
// operands' tensor maps, and the kernel the plan chose (KernelChoices::
// swiglu_forward / swiglu_backward). The kernels and their shared pieces are
// in kernel_*.cu and tiles.cuh.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "device/arch/tma_maps.h"
#include "device/cuda_common.cuh"
#include "model/kernel_choices.h"
#include "model/step_plan.h"
#include "ops/attention/flash/flash_attention.h"
#include "ops/swiglu/swiglu_gemm/kernels.h"
#include "ops/swiglu/swiglu_gemm/swiglu_gemm.h"

namespace tinyllama::cuda {
namespace {

using swiglu_gemm::Epi;
using swiglu_gemm::EpiArgs;

template <typename T, Epi E>
void launch_typed(const Mat& a_mat, const Mat& b_mat, const EpiArgs& args, SwigluGemmKernel kernel,
                  cudaStream_t stream) {
  const CUtensorMap ta = arch::tma_map_2d(a_mat, swiglu_gemm::kBM);
  const CUtensorMap tb = arch::tma_map_2d(b_mat, 64);
  if (kernel == SwigluGemmKernel::TwoBlocks) {
    swiglu_gemm::launch_two_blocks<T, E>(ta, tb, args, stream);
  } else {
    swiglu_gemm::launch_pingpong<T, E>(ta, tb, args, stream);
  }
}

// The bf16 or fp16 instantiation, by the operands' dtype (checked before).
template <Epi E>
void launch(const Mat& a_mat, const Mat& b_mat, const EpiArgs& args, SwigluGemmKernel kernel,
            cudaStream_t stream) {
  if (a_mat.dtype == DType::BF16) {
    launch_typed<__nv_bfloat16, E>(a_mat, b_mat, args, kernel, stream);
  } else {
    launch_typed<__half, E>(a_mat, b_mat, args, kernel, stream);
  }
}

bool aligned16(const Mat& m) {
  return reinterpret_cast<std::uintptr_t>(m.data) % 16 == 0 && (m.ld * 2) % 16 == 0;
}

void require_ready(const char* op, const Mat& x, std::int64_t ffn,
                   std::initializer_list<const Mat*> all) {
  DeviceCaps device;
  device.kind = DeviceKind::Cuda;
  device.no_hopper_kernels = hopper_kernels_missing();
  const std::string why = swiglu_gemm_unsupported(device, x.dtype, x.cols, ffn);
  require(why.empty(), op, why);
  for (const Mat* m : all) {
    require(m->dtype == x.dtype, op, "operands must share one dtype");
    require(aligned16(*m), op, "every operand's rows must start 16-byte aligned");
  }
  require(x.rows <= 0x7fffffff, op, "at most 2^31 - 1 rows");
}

}  // namespace

void gemm_swiglu_forward(Mat gate_up, Mat hidden, Mat x, Mat w_gu, SwigluGemmKernel kernel,
                         cudaStream_t stream) {
  const char* op = "gemm_swiglu_forward";
  const std::int64_t f = hidden.cols;
  require(gate_up.rows == x.rows && hidden.rows == x.rows && gate_up.cols == 2 * f, op,
          "gate_up must be [N, 2F] and hidden [N, F] for x's N rows");
  require(w_gu.rows == 2 * f && w_gu.cols == x.cols, op, "w_gu must be [2F, D]");
  require_ready(op, x, f, {&gate_up, &hidden, &x, &w_gu});
  if (x.rows == 0) return;
  const EpiArgs args{static_cast<int>(x.rows),
                     static_cast<int>(f),
                     static_cast<int>(x.cols),
                     gate_up.data,
                     gate_up.ld,
                     hidden.data,
                     hidden.ld};
  launch<Epi::Forward>(x, w_gu, args, kernel, stream);
}

void gemm_swiglu_backward(Mat d_gate_up, Mat d_out, Mat w_down, Mat gate_up,
                          SwigluGemmKernel kernel, cudaStream_t stream) {
  const char* op = "gemm_swiglu_backward";
  const std::int64_t f = w_down.cols;
  require(w_down.rows == d_out.cols, op, "w_down must be [D, F] for d_out's D columns");
  require(gate_up.rows == d_out.rows && d_gate_up.rows == d_out.rows && gate_up.cols == 2 * f &&
              d_gate_up.cols == 2 * f,
          op, "gate_up and d_gate_up must be [N, 2F]");
  require_ready(op, d_out, f, {&d_gate_up, &d_out, &w_down, &gate_up});
  if (d_out.rows == 0) return;
  const EpiArgs args{static_cast<int>(d_out.rows),
                     static_cast<int>(f),
                     static_cast<int>(d_out.cols),
                     gate_up.data,
                     gate_up.ld,
                     d_gate_up.data,
                     d_gate_up.ld};
  launch<Epi::Backward>(d_out, w_down, args, kernel, stream);
}

}  // namespace tinyllama::cuda
