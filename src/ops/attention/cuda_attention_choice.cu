// attention=cudnn and attention=auto on CUDA: see attention_choice.h.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "device/cuda_check.h"
#include "device/cuda_common.cuh"
#include "device/cuda_event_timer.h"
#include "device/cuda_launch.cuh"
#include "ops/attention/cuda_attention_choice.h"
#include "ops/attention/flash/flash_attention.h"

namespace tinyllama::cuda {
namespace {

constexpr int kWarmup = 3;
constexpr int kTimed = 15;

// Uniform values in [-2, 2) from a hash of the index: scores q.k/sqrt(hd)
// of about one unit, as in a trained model's early steps, so that neither
// implementation meets a degenerate softmax.
template <typename T>
__global__ void fill_uniform_kernel(T* p, std::int64_t n, std::uint32_t seed) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = from_f32<T>(static_cast<float>(h >> 8) * (4.0f / 16777216.0f) - 2.0f);
  }
}

// Device buffers freed on every path out, errors included.
class Scratch {
 public:
  ~Scratch() {
    for (void* p : blocks_) cudaFree(p);
  }
  void* take(std::int64_t bytes) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, static_cast<std::size_t>(std::max<std::int64_t>(bytes, 256))));
    blocks_.push_back(p);
    return p;
  }
  Mat mat(std::int64_t rows, std::int64_t cols, DType t) {
    return Mat(take(rows * cols * static_cast<std::int64_t>(dtype_size(t))), t, rows, cols);
  }

 private:
  std::vector<void*> blocks_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void fill(Mat m, std::uint32_t seed, cudaStream_t stream) {
  const std::int64_t n = m.rows * m.ld;
  dispatch_float(m.dtype, "time_attention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    launch_kernel(fill_uniform_kernel<T>, grid_for(n), kThreads, 0, stream, m.ptr<T>(), n, seed);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace

SdpaLayout model_sdpa_layout(const ModelConfig& cfg, BatchShape shape, DType dtype) {
  SdpaLayout layout;
  layout.shape = attention_shape(cfg, shape);
  layout.dtype = dtype;
  layout.ld_qkv = cfg.qkv_dim();
  layout.ld_out = cfg.q_dim();
  return layout;
}

std::string cudnn_attention_support(const ModelConfig& cfg, BatchShape shape, Precision precision) {
  return cudnn_sdpa_unsupported(model_sdpa_layout(cfg, shape, precision.compute));
}

AttentionTiming time_attention(AttentionImpl impl, const ModelConfig& cfg, BatchShape shape,
                               Precision precision, const KernelChoices& kernels) {
  require(impl == AttentionImpl::Flash || impl == AttentionImpl::Cudnn, "time_attention",
          std::string("times flash or cudnn, not ") + impl_name(impl));
  const DType t = precision.compute;
  const SdpaLayout layout = model_sdpa_layout(cfg, shape, t);
  const AttentionShape& as = layout.shape;
  const std::int64_t tokens = shape.tokens();
  const std::int64_t qd = cfg.q_dim();
  const std::int64_t kvd = cfg.kv_dim();

  Scratch s;
  const Mat qkv = s.mat(tokens, cfg.qkv_dim(), t);
  const Mat d_qkv = s.mat(tokens, cfg.qkv_dim(), t);
  const Mat out = s.mat(tokens, qd, t);
  const Mat dout = s.mat(tokens, qd, t);
  const Mat lse = s.mat(static_cast<std::int64_t>(as.batch) * as.heads, as.seq, DType::F32);
  const Mat q = qkv.col_block(0, qd), k = qkv.col_block(qd, kvd), v = qkv.col_block(qd + kvd, kvd);
  const Mat dq = d_qkv.col_block(0, qd), dk = d_qkv.col_block(qd, kvd),
            dv = d_qkv.col_block(qd + kvd, kvd);

  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  struct StreamGuard {
    cudaStream_t s;
    ~StreamGuard() { cudaStreamDestroy(s); }
  } guard{stream};
  fill(qkv, 1, stream);
  fill(dout, 2, stream);

  const CudnnSdpa* sdpa = impl == AttentionImpl::Cudnn ? &cudnn_sdpa_for(layout) : nullptr;
  void* workspace = nullptr;
  FlashScratch flash;
  if (sdpa != nullptr) {
    workspace = s.take(sdpa->workspace_bytes());
  } else {
    flash =
        flash_attention_scratch(s.take(flash_attention_scratch_bytes(as, kernels)), as, kernels);
  }
  auto forward = [&] {
    if (sdpa != nullptr) {
      sdpa->forward(out, lse, q, k, v, workspace, stream);
    } else {
      flash_attention_forward(kernels, out, lse, q, k, v, as, stream);
    }
  };
  auto backward = [&] {
    if (sdpa != nullptr) {
      sdpa->backward(dq, dk, dv, dout, q, k, v, out, lse, workspace, stream);
    } else {
      flash_attention_backward(kernels, flash, dq, dk, dv, dout, q, k, v, out, lse, as, stream);
    }
  };

  const std::unique_ptr<EventTimer> timer = make_event_timer(3, stream);
  std::vector<double> fwd, bwd;
  for (int i = 0; i < kWarmup + kTimed; ++i) {
    timer->record(0);
    forward();
    timer->record(1);
    backward();
    timer->record(2);
    if (i < kWarmup) {
      CUDA_CHECK(cudaStreamSynchronize(stream));
      continue;
    }
    fwd.push_back(timer->elapsed_ms(0, 1));
    bwd.push_back(timer->elapsed_ms(1, 2));
  }
  if (sdpa != nullptr) {
    return {median(fwd), median(bwd), static_cast<std::int64_t>(sdpa->forward_workspace_bytes()),
            static_cast<std::int64_t>(sdpa->workspace_bytes())};
  }
  return {median(fwd), median(bwd), 0,
          static_cast<std::int64_t>(flash_attention_scratch_bytes(as, kernels))};
}

}  // namespace tinyllama::cuda
