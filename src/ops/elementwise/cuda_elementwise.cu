// The residual add and the product on 2-D views with row strides.
// Arithmetic in fp32, one rounding on the store.
#include "ops/elementwise/cuda_elementwise.h"
#include "ops/elementwise/cuda_elementwise_kernel.cuh"

namespace tinyllama::cuda {
namespace {

struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MulOp {
  __device__ float operator()(float a, float b) const { return a * b; }
};

}  // namespace

using elementwise::launch_binary;

void add(Mat out, Mat a, Mat b, cudaStream_t stream) {
  launch_binary("add", out, a, b, AddOp{}, stream);
}

void mul(Mat out, Mat a, Mat b, cudaStream_t stream) {
  launch_binary("mul", out, a, b, MulOp{}, stream);
}

}  // namespace tinyllama::cuda
