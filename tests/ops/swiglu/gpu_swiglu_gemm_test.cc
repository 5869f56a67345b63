// SwigluImpl::Gemm's two ops (Backend::gemm_swiglu_forward / _backward) on
// the CUDA backend against the float64 reference composed from the reference
// GEMM and SwiGLU, with the GEMM outputs rounded where the model stores them
// (gate_up; d_hidden, which the fused backward rounds without storing):
// a single row, row counts off the 128-row tile, hidden widths off the
// 64-wide k step (72), FFN widths off the 128-column tile (192), padded rows,
// bf16 and fp16 (the Hopper kernel), fp32 and an FFN width off 64 (the
// composed fallback). The cuBLASLt + elementwise composition on the same
// device is measured beside it: the fused result must be as close to the
// reference as the tolerance allows and close to the composition. Both
// kernels (ping-pong and the two-block form) run each case; the
// shapes include more tiles than SMs (N 2100 x F 1536: 17 x 12 tiles) so
// that the persistent kernel's blocks take several tiles each and both
// consumers take turns.
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/gpu_test_util.h"
#include "ops/attention/flash/flash_attention.h"
#include "ops/convert/cpu_convert.h"
#include "ops/linear/cpu_gemm.h"
#include "ops/swiglu/cpu_swiglu.h"
#include "ops/swiglu/swiglu_gemm/swiglu_gemm.h"

namespace tinyllama::gpu_test {
namespace {

// (dtype, rows, hidden D, FFN F, row padding)
using SwigluGemmParam = std::tuple<DType, std::int64_t, std::int64_t, std::int64_t, std::int64_t>;

class GpuSwigluGemm : public GpuParamTest<SwigluGemmParam> {};

// Both schedules, each called with its kernel where the kernels take the
// operands, then the backend's default (its plan's schedule, or the
// composition where the kernels cannot run), so that the comparison with the
// composition below is the default's.
constexpr std::pair<SwigluGemmKernel, const char*> kKernels[] = {
    {SwigluGemmKernel::TwoBlocks, "two-blocks"}, {SwigluGemmKernel::PingPong, "ping-pong"}};

bool kernels_take(Harness& h, DType t, std::int64_t d, std::int64_t f) {
  return swiglu_gemm_unsupported(h.gpu().caps(), t, d, f).empty();
}

cudaStream_t stream_of(Harness& h) {
  return static_cast<cudaStream_t>(h.gpu().main_stream_handle());
}

// The values of m rounded to dtype t, as a twin (a stored GEMM output).
Twin rounded(Harness& h, const Twin& m, DType t, std::int64_t pad) {
  std::vector<double> v = Harness::host_values(m.cpu);
  for (double& x : v) x = round_to(x, t);
  return h.from_values(m.cpu.rows, m.cpu.cols, t, v, pad);
}

TEST_P(GpuSwigluGemm, ForwardMatchesGemmThenSwiglu) {
  const auto [t, n, d, f, pad] = GetParam();
  Harness h(t);
  const Twin x = h.input(n, d, t, 1.0, pad);
  const Twin w = h.input(2 * f, d, t, 1.0 / std::sqrt(static_cast<double>(d)), pad);
  const Twin gu = h.output(n, 2 * f, t, pad);
  const Twin hidden = h.output(n, f, t, pad);
  cpu::gemm(gu.cpu, x.cpu, false, w.cpu, true, 1.0, 0.0);
  // h from g and u as stored.
  const Twin gu_stored = rounded(h, gu, t, 0);
  cpu::convert(gu.cpu, gu_stored.cpu);
  cpu::swiglu_forward(hidden.cpu, gu.cpu.col_block(0, f), gu.cpu.col_block(f, f));

  for (const auto& [kernel, name] : kKernels) {
    if (!kernels_take(h, t, d, f)) break;
    h.poison(gu.gpu);
    h.poison(hidden.gpu);
    cuda::gemm_swiglu_forward(gu.gpu, hidden.gpu, x.gpu, w.gpu, kernel, stream_of(h));
    h.expect_close(gu, tolerance(t), std::string(name) + " gemm_swiglu_forward gate_up");
    h.expect_close(hidden, tolerance(t), std::string(name) + " gemm_swiglu_forward hidden");
  }
  h.poison(gu.gpu);
  h.poison(hidden.gpu);
  h.gpu().gemm_swiglu_forward(gu.gpu, hidden.gpu, x.gpu, w.gpu);
  h.expect_close(gu, tolerance(t), "default gemm_swiglu_forward gate_up");
  h.expect_close(hidden, tolerance(t), "default gemm_swiglu_forward hidden");

  // The composition (cuBLASLt, then the SwiGLU kernel) on the same inputs.
  const Twin gu2 = h.output(n, 2 * f, t, pad);
  const Twin hidden2 = h.output(n, f, t, pad);
  h.gpu().Backend::gemm_swiglu_forward(gu2.gpu, hidden2.gpu, x.gpu, w.gpu);
  cpu::convert(gu2.cpu, gu.cpu);
  cpu::convert(hidden2.cpu, hidden.cpu);
  const double fused = h.rel_err(hidden);
  const double composed = h.rel_err(hidden2);
  // Two GEMMs summing in different orders round g and u apart by an ulp at
  // most here and there; h inherits it.
  EXPECT_LE(fused, composed + tolerance(t) / 2) << "fused " << fused << ", composed " << composed;
}

TEST_P(GpuSwigluGemm, BackwardMatchesGemmThenSwigluBackward) {
  const auto [t, n, d, f, pad] = GetParam();
  Harness h(t);
  const Twin d_out = h.input(n, d, t, 1.0, pad);
  const Twin w_down = h.input(d, f, t, 1.0 / std::sqrt(static_cast<double>(d)), pad);
  const Twin gu = h.input(n, 2 * f, t, 2.0, pad);  // silu's curve on both sides of 0
  const Twin d_gu = h.output(n, 2 * f, t, pad);
  const Twin d_hidden = h.output(n, f, t, pad);
  cpu::gemm(d_hidden.cpu, d_out.cpu, false, w_down.cpu, false, 1.0, 0.0);
  const Twin dh_stored = rounded(h, d_hidden, t, 0);
  cpu::swiglu_backward(d_gu.cpu.col_block(0, f), d_gu.cpu.col_block(f, f), dh_stored.cpu,
                       gu.cpu.col_block(0, f), gu.cpu.col_block(f, f));

  for (const auto& [kernel, name] : kKernels) {
    if (!kernels_take(h, t, d, f)) break;
    h.poison(d_gu.gpu);
    cuda::gemm_swiglu_backward(d_gu.gpu, d_out.gpu, w_down.gpu, gu.gpu, kernel, stream_of(h));
    h.expect_close(d_gu, tolerance(t), std::string(name) + " gemm_swiglu_backward d_gate_up");
  }
  h.poison(d_gu.gpu);
  h.gpu().gemm_swiglu_backward(d_gu.gpu, d_hidden.gpu, d_out.gpu, w_down.gpu, gu.gpu);
  h.expect_close(d_gu, tolerance(t), "default gemm_swiglu_backward d_gate_up");

  const Twin d_gu2 = h.output(n, 2 * f, t, pad);
  h.gpu().Backend::gemm_swiglu_backward(d_gu2.gpu, d_hidden.gpu, d_out.gpu, w_down.gpu, gu.gpu);
  cpu::convert(d_gu2.cpu, d_gu.cpu);
  const double fused = h.rel_err(d_gu);
  const double composed = h.rel_err(d_gu2);
  EXPECT_LE(fused, composed + tolerance(t) / 2) << "fused " << fused << ", composed " << composed;
}

std::string swiglu_gemm_name(const ::testing::TestParamInfo<SwigluGemmParam>& info) {
  const auto [t, n, d, f, pad] = info.param;
  return dtype_label(t) + "_N" + std::to_string(n) + "_D" + std::to_string(d) + "_F" +
         std::to_string(f) + "_pad" + std::to_string(pad);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuSwigluGemm,
                         ::testing::Values(SwigluGemmParam{DType::BF16, 1, 64, 64, 0},
                                           SwigluGemmParam{DType::BF16, 130, 72, 192, 8},
                                           SwigluGemmParam{DType::BF16, 300, 512, 1024, 0},
                                           SwigluGemmParam{DType::BF16, 257, 768, 2048, 16},
                                           SwigluGemmParam{DType::BF16, 2100, 200, 1536, 8},
                                           SwigluGemmParam{DType::F16, 1, 64, 64, 8},
                                           SwigluGemmParam{DType::F16, 130, 72, 192, 0},
                                           SwigluGemmParam{DType::F16, 300, 512, 1024, 8},
                                           // The composed fallback: fp32, and an FFN width off 64.
                                           SwigluGemmParam{DType::F32, 130, 72, 192, 1},
                                           SwigluGemmParam{DType::BF16, 70, 64, 100, 0}),
                         swiglu_gemm_name);

// The device's facts agree with what the kernels check: where the plan
// says they run, a call with both schedules runs (covered above); this
// device's facts name the Hopper kernels exactly when the flash dispatch
// finds them.
TEST_F(GpuTest, TheFactsSayWhetherTheHopperKernelsRun) {
  Harness h(DType::BF16);
  EXPECT_EQ(h.gpu().caps().no_hopper_kernels.empty(), cuda::flash_hopper_kernels_available());
  EXPECT_GT(h.gpu().caps().sm_count, 0);
}

}  // namespace
}  // namespace tinyllama::gpu_test
