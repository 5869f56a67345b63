#pragma once
// Building an operation graph of cuDNN's backend API: tensor descriptors and
// the four kinds of operation the attention graphs use (matmul, pointwise,
// reduction, reshape), then the operation graph itself.
//
// The builder owns every descriptor it makes and must outlive the plans
// built from its graph: an operation graph refers to its operations and
// tensors rather than copying them, so they are kept together.
//
// Tensors are 4-D [b, h, rows, cols] throughout, as cuDNN's fused attention
// engines expect. Non-virtual tensors (device or host memory the caller
// binds at execution, by uid) get fixed uids; virtual ones (intermediates the
// fused engine keeps on chip) get uids from kFirstVirtualUid up.
#include <cudnn.h>

#include <cstdint>
#include <deque>
#include <vector>

#include "ops/attention/cudnn/backend_descriptor.h"

namespace tinyllama::cuda::cudnn {

using Dims = std::vector<std::int64_t>;

struct Tensor {
  const Descriptor* desc = nullptr;  // owned by the GraphBuilder
  std::int64_t uid = 0;
  Dims dims;
  Dims strides;
  cudnnDataType_t dtype = CUDNN_DATA_FLOAT;
};

// Row-major strides of dims (the last dimension contiguous).
Dims packed_strides(const Dims& dims);

class GraphBuilder {
 public:
  static constexpr std::int64_t kFirstVirtualUid = 1000;

  // Memory the caller binds to `uid` at execution.
  Tensor tensor(std::int64_t uid, Dims dims, Dims strides, cudnnDataType_t dtype);
  // A [1,1,1,1] scalar passed by value: its variant-pack pointer is a host
  // address cuDNN reads at execution.
  Tensor scalar(std::int64_t uid, cudnnDataType_t dtype);
  // An intermediate of the fused graph; packed strides unless given.
  Tensor virtual_tensor(Dims dims, cudnnDataType_t dtype);
  Tensor virtual_tensor(Dims dims, Dims strides, cudnnDataType_t dtype);

  // c = a @ b over the last two dims, batched over the first two (b's head
  // dim may divide a's: grouped-query attention). Accumulates in fp32.
  void matmul(const Tensor& a, const Tensor& b, const Tensor& c);
  // y = mode(x) / mode(x, b) / mode(x, b, t) (BINARY_SELECT: y = t ? x : b),
  // computed in `compute`. `axis` is for GEN_INDEX only (-1: none).
  void pointwise(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor& y,
                 cudnnDataType_t compute);
  void pointwise(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor& b, const Tensor& y,
                 cudnnDataType_t compute);
  void pointwise(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor& b, const Tensor& t,
                 const Tensor& y, cudnnDataType_t compute);
  void gen_index(const Tensor& like, const Tensor& y, std::int64_t axis);
  // y = reduce(x) over the dims where y is 1 (or where y's head count
  // divides x's: the sum over a GQA group), in fp32.
  void reduction(cudnnReduceTensorOp_t op, const Tensor& x, const Tensor& y);
  // y views x with other dims/strides (a transpose, for the backward's P^T).
  void reshape(const Tensor& x, const Tensor& y);

  // The finalized operation graph of every operation added, for `handle`.
  const Descriptor& finalize(cudnnHandle_t handle);
  const Descriptor& graph() const { return graph_; }

 private:
  Tensor make(std::int64_t uid, Dims dims, Dims strides, cudnnDataType_t dtype, bool is_virtual,
              bool by_value);
  void add_pointwise(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor* b, const Tensor* t,
                     const Tensor& y, cudnnDataType_t compute, std::int64_t axis);

  std::deque<Descriptor> tensors_;    // deque: Tensor::desc pointers stay valid
  std::vector<Descriptor> op_descs_;  // matmul/pointwise/reduction descriptors
  std::vector<Descriptor> ops_;       // the operations, in the order added
  Descriptor graph_;
  std::int64_t next_virtual_uid_ = kFirstVirtualUid;
};

}  // namespace tinyllama::cuda::cudnn
