// dst = src in dst's dtype: the master -> compute weight copy under AMP, and
// the tests' rounding of inputs. Round to nearest even, like PyTorch's .to().
#include "device/cuda_common.cuh"
#include "device/cuda_launch.cuh"
#include "ops/convert/cuda_convert.h"

namespace tinyllama::cuda {
namespace {

template <typename TOut, typename TIn>
__global__ void convert_kernel(TOut* __restrict__ dst, std::int64_t ld_dst,
                               const TIn* __restrict__ src, std::int64_t ld_src, std::int64_t rows,
                               std::int64_t cols) {
  pdl_wait_previous();  // first: PDL (device/cuda_launch.cuh)
  pdl_allow_next();
  const std::int64_t n = rows * cols;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t r = i / cols;
    const std::int64_t c = i - r * cols;
    dst[r * ld_dst + c] = from_f32<TOut>(to_f32(src[r * ld_src + c]));
  }
}

}  // namespace

void convert(Mat dst, Mat src, cudaStream_t stream) {
  require_same_shape("convert", dst, src);
  if (dst.numel() == 0) return;
  dispatch_float(dst.dtype, "convert", [&](auto out_tag) {
    using TOut = typename decltype(out_tag)::type;
    dispatch_float(src.dtype, "convert", [&](auto in_tag) {
      using TIn = typename decltype(in_tag)::type;
      launch_kernel(convert_kernel<TOut, TIn>, grid_for(dst.numel()), kThreads, 0, stream,
                    dst.ptr<TOut>(), dst.ld, src.ptr<const TIn>(), src.ld, dst.rows, dst.cols);
      CUDA_CHECK_LAUNCH();
    });
  });
}

}  // namespace tinyllama::cuda
