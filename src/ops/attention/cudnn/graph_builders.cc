#include "ops/attention/cudnn/graph_builders.h"

#include <utility>

namespace tinyllama::cuda::cudnn {

namespace {

// 16 bytes is what cuDNN's tensor-core engines need of every pointer; the
// caller's pointers are checked against it before each execution.
constexpr std::int64_t kByteAlignment = 16;

}  // namespace

Dims packed_strides(const Dims& dims) {
  Dims strides(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  return strides;
}

Tensor GraphBuilder::make(std::int64_t uid, Dims dims, Dims strides, cudnnDataType_t dtype,
                          bool is_virtual, bool by_value) {
  Descriptor& d = tensors_.emplace_back(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  d.set_data_type(CUDNN_ATTR_TENSOR_DATA_TYPE, dtype, "tensor data type");
  d.set_int64s(CUDNN_ATTR_TENSOR_DIMENSIONS, dims, "tensor dimensions");
  d.set_int64s(CUDNN_ATTR_TENSOR_STRIDES, strides, "tensor strides");
  d.set_int64(CUDNN_ATTR_TENSOR_UNIQUE_ID, uid, "tensor uid");
  d.set_int64(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, kByteAlignment, "tensor alignment");
  if (is_virtual) d.set_bool(CUDNN_ATTR_TENSOR_IS_VIRTUAL, true, "tensor is_virtual");
  if (by_value) d.set_bool(CUDNN_ATTR_TENSOR_IS_BY_VALUE, true, "tensor is_by_value");
  d.finalize("tensor descriptor");
  return Tensor{&d, uid, std::move(dims), std::move(strides), dtype};
}

Tensor GraphBuilder::tensor(std::int64_t uid, Dims dims, Dims strides, cudnnDataType_t dtype) {
  return make(uid, std::move(dims), std::move(strides), dtype, false, false);
}

Tensor GraphBuilder::scalar(std::int64_t uid, cudnnDataType_t dtype) {
  return make(uid, {1, 1, 1, 1}, {1, 1, 1, 1}, dtype, false, true);
}

Tensor GraphBuilder::virtual_tensor(Dims dims, cudnnDataType_t dtype) {
  Dims strides = packed_strides(dims);
  return virtual_tensor(std::move(dims), std::move(strides), dtype);
}

Tensor GraphBuilder::virtual_tensor(Dims dims, Dims strides, cudnnDataType_t dtype) {
  return make(next_virtual_uid_++, std::move(dims), std::move(strides), dtype, true, false);
}

void GraphBuilder::matmul(const Tensor& a, const Tensor& b, const Tensor& c) {
  Descriptor& desc = op_descs_.emplace_back(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  desc.set_data_type(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_DATA_FLOAT, "matmul compute type");
  desc.finalize("matmul descriptor");

  Descriptor& op = ops_.emplace_back(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_ADESC, *a.desc, "matmul A");
  op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_BDESC, *b.desc, "matmul B");
  op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_CDESC, *c.desc, "matmul C");
  op.set_descriptor(CUDNN_ATTR_OPERATION_MATMUL_DESC, desc, "matmul descriptor");
  op.finalize("matmul operation");
}

void GraphBuilder::add_pointwise(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor* b,
                                 const Tensor* t, const Tensor& y, cudnnDataType_t compute,
                                 std::int64_t axis) {
  Descriptor& desc = op_descs_.emplace_back(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  desc.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode");
  desc.set_data_type(CUDNN_ATTR_POINTWISE_MATH_PREC, compute, "pointwise precision");
  if (axis >= 0) desc.set_int64(CUDNN_ATTR_POINTWISE_AXIS, axis, "pointwise axis");
  desc.finalize("pointwise descriptor");

  Descriptor& op = ops_.emplace_back(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, desc, "pointwise descriptor");
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, *x.desc, "pointwise X");
  if (b != nullptr)
    op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b->desc, "pointwise B");
  if (t != nullptr)
    op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t->desc, "pointwise T");
  op.set_descriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, *y.desc, "pointwise Y");
  // y = op(alpha1 * x, alpha2 * b): plain operands.
  op.set_float(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, 1.0f, "pointwise alpha1");
  op.set_float(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, 1.0f, "pointwise alpha2");
  op.finalize("pointwise operation");
}

void GraphBuilder::pointwise(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor& y,
                             cudnnDataType_t compute) {
  add_pointwise(mode, x, nullptr, nullptr, y, compute, -1);
}

void GraphBuilder::pointwise(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor& b,
                             const Tensor& y, cudnnDataType_t compute) {
  add_pointwise(mode, x, &b, nullptr, y, compute, -1);
}

void GraphBuilder::pointwise(cudnnPointwiseMode_t mode, const Tensor& x, const Tensor& b,
                             const Tensor& t, const Tensor& y, cudnnDataType_t compute) {
  add_pointwise(mode, x, &b, &t, y, compute, -1);
}

void GraphBuilder::gen_index(const Tensor& like, const Tensor& y, std::int64_t axis) {
  add_pointwise(CUDNN_POINTWISE_GEN_INDEX, like, nullptr, nullptr, y, CUDNN_DATA_FLOAT, axis);
}

void GraphBuilder::reduction(cudnnReduceTensorOp_t op_kind, const Tensor& x, const Tensor& y) {
  Descriptor& desc = op_descs_.emplace_back(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  desc.set_data_type(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_DATA_FLOAT, "reduction compute type");
  desc.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &op_kind,
           "reduction operator");
  desc.finalize("reduction descriptor");

  Descriptor& op = ops_.emplace_back(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, *x.desc, "reduction X");
  op.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, *y.desc, "reduction Y");
  op.set_descriptor(CUDNN_ATTR_OPERATION_REDUCTION_DESC, desc, "reduction descriptor");
  op.finalize("reduction operation");
}

void GraphBuilder::reshape(const Tensor& x, const Tensor& y) {
  Descriptor& op = ops_.emplace_back(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  op.set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, *x.desc, "reshape X");
  op.set_descriptor(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, *y.desc, "reshape Y");
  op.finalize("reshape operation");
}

const Descriptor& GraphBuilder::finalize(cudnnHandle_t handle) {
  std::vector<cudnnBackendDescriptor_t> raw;
  raw.reserve(ops_.size());
  for (const Descriptor& op : ops_) raw.push_back(op.get());
  graph_ = Descriptor(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph_.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle,
             "operation graph handle");
  graph_.set_descriptors(CUDNN_ATTR_OPERATIONGRAPH_OPS, raw, "operation graph ops");
  graph_.finalize("operation graph");
  return graph_;
}

}  // namespace tinyllama::cuda::cudnn
