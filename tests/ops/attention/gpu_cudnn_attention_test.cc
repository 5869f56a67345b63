// cuDNN's fused attention (src/ops/attention/cudnn) against the float64 reference:
// causal, GQA ratios 1/2/3/4, head dims 32/64/128, sequence lengths off every
// tile size (7, 33, 100, 129, 257) and one long one, bf16 and fp16. q/k/v
// (dq/dk/dv) are column blocks of one qkv (d_qkv) buffer, out/dout of their
// own, as the model lays them out; one case pads every row by 8 elements
// (16 bytes); rows padded by 2 (off 16 bytes) are refused, with the reason.
// Outputs and the workspace start as NaN bytes, so an element cuDNN
// forgets, or scratch it reads before writing, shows.
//
// Also: cudnn_sdpa_unsupported's reasons for fp32 and S = 1; the cache and
// the argument checks; a CUDA graph of forward + backward replays the eager
// results bit for bit, workspace poisoned before each replay; and (disabled,
// run by hand) the throughput at two training shapes.
//
// Plans are built per layout and cached for the process, and building one
// takes a while (runtime-compiled engines): the shapes are few on purpose.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iostream>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/gpu_test_util.h"
#include "ops/attention/cpu_attention.h"
#include "ops/attention/cudnn/cudnn_sdpa.h"

namespace tinyllama::gpu_test {
namespace {

using cuda::CudnnSdpa;
using cuda::SdpaLayout;

struct CudnnCase {
  int batch, seq, heads, kv_heads, head_dim;
  int pad;  // extra elements per row of every [tokens, *] buffer
};

void PrintTo(const CudnnCase& c, std::ostream* os) {
  *os << "B" << c.batch << " S" << c.seq << " H" << c.heads << " K" << c.kv_heads << " hd"
      << c.head_dim << " pad" << c.pad;
}

AttentionShape shape_of(const CudnnCase& c) {
  return AttentionShape{c.batch, c.seq, c.heads, c.kv_heads, c.head_dim};
}

struct Dims {
  std::int64_t tokens, qd, kvd, bh;
  explicit Dims(const AttentionShape& s)
      : tokens(static_cast<std::int64_t>(s.batch) * s.seq),
        qd(static_cast<std::int64_t>(s.heads) * s.head_dim),
        kvd(static_cast<std::int64_t>(s.kv_heads) * s.head_dim),
        bh(static_cast<std::int64_t>(s.batch) * s.heads) {}
};

SdpaLayout layout_of(const AttentionShape& s, DType t, int pad) {
  const Dims d(s);
  return SdpaLayout{s, t, d.qd + 2 * d.kvd + pad, d.qd + pad};
}

// Device memory for the workspace, NaN bytes to start with.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::int64_t bytes) : bytes_(std::max<std::int64_t>(bytes, 16)) {
    EXPECT_EQ(cudaMalloc(&p_, static_cast<std::size_t>(bytes_)), cudaSuccess);
    poison();
  }
  ~DeviceBuffer() { cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }
  void poison() {
    EXPECT_EQ(cudaMemset(p_, 0xff, static_cast<std::size_t>(bytes_)), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }

 private:
  void* p_ = nullptr;
  std::int64_t bytes_;
};

// The plans of a layout, reporting how long building them took (first use
// in the process only; later calls hit the cache).
const CudnnSdpa& plans_for(const SdpaLayout& layout) {
  const auto start = std::chrono::steady_clock::now();
  const CudnnSdpa& sdpa = cuda::cudnn_sdpa_for(layout);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (s > 0.01) {
    std::cout << "[ cudnn    ] plans for B" << layout.shape.batch << " S" << layout.shape.seq
              << " H" << layout.shape.heads << " K" << layout.shape.kv_heads << " hd"
              << layout.shape.head_dim << " " << dtype_name(layout.dtype) << " ld " << layout.ld_qkv
              << "/" << layout.ld_out << ": built in " << s << " s, workspace "
              << sdpa.workspace_bytes() << " B\n";
  }
  return sdpa;
}

// A build without cuDNN reports every layout unsupported (no_cudnn.cc):
// these tests then have nothing to run.
bool skip_without_cudnn() {
  return !cuda::cudnn_build_note().empty();
}

class CudnnTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    if (skip_without_cudnn()) GTEST_SKIP() << cuda::cudnn_build_note();
  }
};

using CudnnParam = std::tuple<DType, CudnnCase>;

class GpuCudnnAttention : public GpuParamTest<CudnnParam> {
 protected:
  void SetUp() override {
    GpuParamTest<CudnnParam>::SetUp();
    if (IsSkipped()) return;
    if (skip_without_cudnn()) GTEST_SKIP() << cuda::cudnn_build_note();
  }
};

TEST_P(GpuCudnnAttention, ForwardAndBackwardMatchReference) {
  const auto [t, c] = GetParam();
  const AttentionShape s = shape_of(c);
  const Dims d(s);
  const SdpaLayout layout = layout_of(s, t, c.pad);
  const std::string why = cuda::cudnn_sdpa_unsupported(layout);
  ASSERT_EQ(why, "") << "cuDNN refused a layout the tests expect it to run";
  const CudnnSdpa& sdpa = plans_for(layout);

  Harness h(t);
  cudaStream_t stream = h.gpu().stream();
  DeviceBuffer ws(sdpa.workspace_bytes());

  // Scale 1.5: scores of a few units, so the softmax is neither flat nor one-hot.
  const Twin qkv = h.input(d.tokens, d.qd + 2 * d.kvd, t, 1.5, c.pad);
  const Twin q = col_block(qkv, 0, d.qd);
  const Twin k = col_block(qkv, d.qd, d.kvd);
  const Twin v = col_block(qkv, d.qd + d.kvd, d.kvd);
  const Twin out = h.output(d.tokens, d.qd, t, c.pad);
  const Twin lse = h.output(d.bh, c.seq, DType::F32);
  cpu::attention_forward(out.cpu, lse.cpu, Mat{}, q.cpu, k.cpu, v.cpu, s);
  sdpa.forward(out.gpu, lse.gpu, q.gpu, k.gpu, v.gpu, ws.get(), stream);
  h.expect_close(out, tolerance(t), "cudnn attention out (row padding must stay untouched)");
  // lse is fp32, but of scores from inputs in the compute dtype.
  h.expect_close(lse, tolerance(t), "cudnn attention lse");

  // Backward from the reference's forward results (rounded to the dtype the
  // model would save them in), so only the backward is measured.
  ws.poison();
  const Twin out_saved = h.copy_of(out.cpu, t, c.pad);
  const Twin lse_saved = h.copy_of(lse.cpu, DType::F32);
  const Twin dout = h.input(d.tokens, d.qd, t, 1.0, c.pad);
  const Twin dqkv = h.output(d.tokens, d.qd + 2 * d.kvd, t, c.pad);
  const Twin dq = col_block(dqkv, 0, d.qd);
  const Twin dk = col_block(dqkv, d.qd, d.kvd);
  const Twin dv = col_block(dqkv, d.qd + d.kvd, d.kvd);
  cpu::attention_backward(dq.cpu, dk.cpu, dv.cpu, dout.cpu, q.cpu, k.cpu, v.cpu, lse_saved.cpu,
                          Mat{}, s);
  sdpa.backward(dq.gpu, dk.gpu, dv.gpu, dout.gpu, q.gpu, k.gpu, v.gpu, out_saved.gpu, lse_saved.gpu,
                ws.get(), stream);
  h.expect_close(dq, tolerance(t), "cudnn attention dq");
  h.expect_close(dk, tolerance(t), "cudnn attention dk (summed over the group)");
  h.expect_close(dv, tolerance(t), "cudnn attention dv (summed over the group)");
  EXPECT_TRUE(std::isfinite(h.rel_err(dqkv)))
      << "part of d_qkv was not written, or its row padding was";
}

const CudnnCase kBothDtypes[] = {
    {1, 7, 4, 2, 64, 0},    // a fraction of one tile, GQA 2
    {2, 33, 8, 2, 128, 0},  // just past 32 rows, GQA 4, hd 128
    {3, 100, 6, 2, 32, 0},  // GQA 3, hd 32
    {1, 129, 4, 4, 64, 0},  // just past two 64-row tiles, no GQA
    {2, 257, 8, 4, 64, 0},  // the workshop's heads, a 1-row last tile
    {2, 65, 4, 2, 64, 8},   // every row padded by 16 bytes
};
const CudnnCase kBf16Only[] = {
    {1, 1024, 4, 1, 128, 0},  // many key tiles, all heads on one kv head
};

std::string case_name(const ::testing::TestParamInfo<CudnnParam>& info) {
  const auto& [t, c] = info.param;
  return dtype_label(t) + "_B" + std::to_string(c.batch) + "_S" + std::to_string(c.seq) + "_H" +
         std::to_string(c.heads) + "_K" + std::to_string(c.kv_heads) + "_hd" +
         std::to_string(c.head_dim) + (c.pad != 0 ? "_pad" + std::to_string(c.pad) : "");
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuCudnnAttention,
                         ::testing::Combine(::testing::Values(DType::BF16, DType::F16),
                                            ::testing::ValuesIn(kBothDtypes)),
                         case_name);
INSTANTIATE_TEST_SUITE_P(Long, GpuCudnnAttention,
                         ::testing::Combine(::testing::Values(DType::BF16),
                                            ::testing::ValuesIn(kBf16Only)),
                         case_name);

// ---- what is refused, and why -----------------------------------------------

TEST_F(CudnnTest, CudnnRefusesFp32WithAReason) {
  const std::string why = cuda::cudnn_sdpa_unsupported(layout_of({2, 64, 4, 2, 64}, DType::F32, 0));
  EXPECT_NE(why.find("float32"), std::string::npos) << why;
  EXPECT_THROW(CudnnSdpa(layout_of({2, 64, 4, 2, 64}, DType::F32, 0)), RuntimeFailure);
}

TEST_F(CudnnTest, CudnnRefusesSeqOneWithAReason) {
  // cuDNN's backward does not support S_q = S_kv = 1.
  const std::string why = cuda::cudnn_sdpa_unsupported(layout_of({3, 1, 4, 1, 64}, DType::BF16, 0));
  EXPECT_NE(why.find("S = 1"), std::string::npos) << why;
}

TEST_F(CudnnTest, CudnnRefusesRowsOff16BytesWithAReason) {
  // cuDNN 9.14 builds plans for these but its kernels fault on the
  // misaligned rows, so the layout is refused before cuDNN sees it.
  for (const auto& [qkv_pad, out_pad] : {std::pair{2, 0}, std::pair{0, 2}, std::pair{4, 4}}) {
    const AttentionShape s{2, 40, 4, 2, 64};
    const Dims d(s);
    const SdpaLayout layout{s, DType::BF16, d.qd + 2 * d.kvd + qkv_pad, d.qd + out_pad};
    const std::string why = cuda::cudnn_sdpa_unsupported(layout);
    EXPECT_NE(why.find("16 bytes"), std::string::npos) << why;
  }
}

TEST_F(CudnnTest, CudnnCachesOneObjectPerLayoutAndChecksItsArguments) {
  const AttentionShape s{2, 40, 4, 2, 64};
  const Dims d(s);
  const SdpaLayout layout = layout_of(s, DType::BF16, 0);
  const CudnnSdpa& sdpa = plans_for(layout);
  EXPECT_EQ(&cuda::cudnn_sdpa_for(layout), &sdpa);
  EXPECT_TRUE(sdpa.layout() == layout);
  Harness h(DType::BF16);
  DeviceBuffer ws(sdpa.workspace_bytes());
  cudaStream_t stream = h.gpu().stream();
  const Twin qkv = h.input(d.tokens, d.qd + 2 * d.kvd, DType::BF16);
  const Mat q = qkv.gpu.col_block(0, d.qd);
  const Mat k = qkv.gpu.col_block(d.qd, d.kvd);
  const Mat v = qkv.gpu.col_block(d.qd + d.kvd, d.kvd);
  const Twin out = h.output(d.tokens, d.qd, DType::BF16);
  const Twin lse = h.output(d.bh, s.seq, DType::F32);
  const Twin padded_out = h.output(d.tokens, d.qd, DType::BF16, 8);
  // Another row stride than the plans were built for, a wrong dtype, a
  // wrong shape, no workspace: refused before cuDNN reads anything.
  EXPECT_THROW(sdpa.forward(padded_out.gpu, lse.gpu, q, k, v, ws.get(), stream), RuntimeFailure);
  EXPECT_THROW(sdpa.forward(out.gpu, out.gpu, q, k, v, ws.get(), stream), RuntimeFailure);
  EXPECT_THROW(sdpa.forward(out.gpu, lse.gpu, q.row_block(0, 2), k, v, ws.get(), stream),
               RuntimeFailure);
  EXPECT_THROW(sdpa.backward(q, k, v, out.gpu, q, k, v, out.gpu, lse.gpu, nullptr, stream),
               RuntimeFailure);
}

// ---- CUDA graph capture ------------------------------------------------------

TEST_F(CudnnTest, CudnnForwardAndBackwardReplayFromACudaGraph) {
  const AttentionShape s{2, 128, 8, 4, 64};
  const DType t = DType::BF16;
  const Dims d(s);
  const SdpaLayout layout = layout_of(s, t, 0);
  ASSERT_EQ(cuda::cudnn_sdpa_unsupported(layout), "");
  const CudnnSdpa& sdpa = plans_for(layout);
  Harness h(t);
  DeviceBuffer ws(sdpa.workspace_bytes());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  const Twin qkv = h.input(d.tokens, d.qd + 2 * d.kvd, t, 1.5);
  const Mat q = qkv.gpu.col_block(0, d.qd);
  const Mat k = qkv.gpu.col_block(d.qd, d.kvd);
  const Mat v = qkv.gpu.col_block(d.qd + d.kvd, d.kvd);
  const Twin dout = h.input(d.tokens, d.qd, t, 1.0);
  const Twin out = h.output(d.tokens, d.qd, t);
  const Twin lse = h.output(d.bh, s.seq, DType::F32);
  const Twin dqkv = h.output(d.tokens, d.qd + 2 * d.kvd, t);
  auto step = [&] {
    sdpa.forward(out.gpu, lse.gpu, q, k, v, ws.get(), stream);
    sdpa.backward(dqkv.gpu.col_block(0, d.qd), dqkv.gpu.col_block(d.qd, d.kvd),
                  dqkv.gpu.col_block(d.qd + d.kvd, d.kvd), dout.gpu, q, k, v, out.gpu, lse.gpu,
                  ws.get(), stream);
  };

  step();  // eager first: nothing lazy may be left for the capture
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<double> eager_out = h.device_values(out.gpu);
  const std::vector<double> eager_lse = h.device_values(lse.gpu);
  const std::vector<double> eager_grad = h.device_values(dqkv.gpu);

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  step();
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);

  for (int replay = 0; replay < 2; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    h.poison(out.gpu);
    h.poison(lse.gpu);
    h.poison(dqkv.gpu);
    ws.poison();
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    auto differing = [](const std::vector<double>& a, const std::vector<double>& b) {
      std::size_t n = 0;
      for (std::size_t i = 0; i < a.size(); ++i) n += !(a[i] == b[i]);  // NaN: unwritten
      return n;
    };
    EXPECT_EQ(differing(h.device_values(out.gpu), eager_out), 0u) << "out";
    EXPECT_EQ(differing(h.device_values(lse.gpu), eager_lse), 0u) << "lse";
    EXPECT_EQ(differing(h.device_values(dqkv.gpu), eager_grad), 0u)
        << "d_qkv, of " << eager_grad.size();
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// ---- throughput (run by hand: --gtest_also_run_disabled_tests) ---------------

// Median milliseconds of `fn` over 20 timed runs after 3 warm-ups.
template <typename Fn>
double median_ms(cudaStream_t stream, Fn fn) {
  for (int i = 0; i < 3; ++i) fn();
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) {
    cudaEventRecord(a, stream);
    fn();
    cudaEventRecord(b, stream);
    cudaEventSynchronize(b);
    float m = 0;
    cudaEventElapsedTime(&m, a, b);
    ms.push_back(m);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Random bf16 values in [-2, 2] on the device (no reference: timing only).
void fill_random_bf16(void* p, std::int64_t n, std::uint32_t seed) {
  std::vector<std::uint16_t> host(static_cast<std::size_t>(n));
  for (auto& x : host) {
    seed = seed * 1664525u + 1013904223u;
    const float f = (static_cast<float>(seed >> 8) / 16777216.0f) * 4.0f - 2.0f;
    std::uint32_t bits = 0;
    std::memcpy(&bits, &f, 4);
    x = static_cast<std::uint16_t>(bits >> 16);
  }
  cudaMemcpy(p, host.data(), host.size() * 2, cudaMemcpyHostToDevice);
}

TEST_F(CudnnTest, DISABLED_CudnnAttentionThroughput) {
  for (const AttentionShape& s :
       {AttentionShape{32, 1024, 8, 4, 64}, AttentionShape{4, 2048, 8, 2, 128}}) {
    const Dims d(s);
    const SdpaLayout layout = layout_of(s, DType::BF16, 0);
    ASSERT_EQ(cuda::cudnn_sdpa_unsupported(layout), "");
    const CudnnSdpa& sdpa = plans_for(layout);
    const std::int64_t qkv_cols = d.qd + 2 * d.kvd;
    void *qkv, *dqkv, *out, *dout, *lse, *ws;
    ASSERT_EQ(cudaMalloc(&qkv, d.tokens * qkv_cols * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dqkv, d.tokens * qkv_cols * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&out, d.tokens * d.qd * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dout, d.tokens * d.qd * 2), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&lse, d.bh * s.seq * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&ws, std::max<std::int64_t>(sdpa.workspace_bytes(), 16)), cudaSuccess);
    fill_random_bf16(qkv, d.tokens * qkv_cols, 1);
    fill_random_bf16(dout, d.tokens * d.qd, 2);
    const Mat all(qkv, DType::BF16, d.tokens, qkv_cols);
    const Mat dall(dqkv, DType::BF16, d.tokens, qkv_cols);
    const Mat q = all.col_block(0, d.qd), k = all.col_block(d.qd, d.kvd),
              v = all.col_block(d.qd + d.kvd, d.kvd);
    const Mat o(out, DType::BF16, d.tokens, d.qd), dO(dout, DType::BF16, d.tokens, d.qd);
    const Mat l(lse, DType::F32, d.bh, s.seq);
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    const double fwd = median_ms(stream, [&] { sdpa.forward(o, l, q, k, v, ws, stream); });
    const double bwd = median_ms(stream, [&] {
      sdpa.backward(dall.col_block(0, d.qd), dall.col_block(d.qd, d.kvd),
                    dall.col_block(d.qd + d.kvd, d.kvd), dO, q, k, v, o, l, ws, stream);
    });
    // Causal: half of the 4*B*H*S^2*hd of the two forward matmuls; the
    // backward counted as twice the forward.
    const double flops = 2.0 * d.bh * s.seq * static_cast<double>(s.seq) * s.head_dim;
    std::cout << "[ cudnn    ] B" << s.batch << " S" << s.seq << " H" << s.heads << " K"
              << s.kv_heads << " hd" << s.head_dim << " bf16: forward " << fwd << " ms ("
              << flops / fwd / 1e9 << " TFLOP/s), backward " << bwd << " ms ("
              << 2 * flops / bwd / 1e9 << " TFLOP/s), workspace " << sdpa.workspace_bytes()
              << " B\n";
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaStreamDestroy(stream);
    for (void* p : {qkv, dqkv, out, dout, lse, ws}) cudaFree(p);
  }
}

}  // namespace
}  // namespace tinyllama::gpu_test
