#include "ops/attention/cudnn/backend_descriptor.h"

#include <utility>

#include "core/errors.h"

namespace tinyllama::cuda::cudnn {

std::string last_error_message() {
  // cuDNN keeps the message of the last failing call per thread; 1 KiB holds
  // the ones seen in practice (cuDNN truncates longer ones).
  char buf[1024] = {0};
  cudnnGetLastErrorString(buf, sizeof(buf));
  return std::string(buf);
}

std::string runtime_version_string() {
  const std::size_t v = cudnnGetVersion();
  // 9.x encodes MAJOR*10000 + MINOR*100 + PATCH.
  return std::to_string(v / 10000) + "." + std::to_string((v / 100) % 100) + "." +
         std::to_string(v % 100);
}

void check(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  std::string msg = "cuDNN: " + what + " failed: " + cudnnGetErrorString(status);
  const std::string detail = last_error_message();
  if (!detail.empty()) {
    msg += ": ";
    msg += detail;
  }
  throw RuntimeFailure(msg);
}

Descriptor::Descriptor(cudnnBackendDescriptorType_t type) {
  check(cudnnBackendCreateDescriptor(type, &desc_), "cudnnBackendCreateDescriptor");
}

Descriptor::~Descriptor() {
  if (desc_ != nullptr) cudnnBackendDestroyDescriptor(desc_);
}

Descriptor::Descriptor(Descriptor&& other) noexcept : desc_(std::exchange(other.desc_, nullptr)) {}

Descriptor& Descriptor::operator=(Descriptor&& other) noexcept {
  if (this != &other) {
    if (desc_ != nullptr) cudnnBackendDestroyDescriptor(desc_);
    desc_ = std::exchange(other.desc_, nullptr);
  }
  return *this;
}

void Descriptor::set(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type,
                     std::int64_t count, const void* values, const char* what) {
  check(cudnnBackendSetAttribute(desc_, attr, type, count, values), std::string("setting ") + what);
}

void Descriptor::set_int64(cudnnBackendAttributeName_t attr, std::int64_t v, const char* what) {
  set(attr, CUDNN_TYPE_INT64, 1, &v, what);
}

void Descriptor::set_int64s(cudnnBackendAttributeName_t attr, const std::vector<std::int64_t>& v,
                            const char* what) {
  set(attr, CUDNN_TYPE_INT64, static_cast<std::int64_t>(v.size()), v.data(), what);
}

void Descriptor::set_bool(cudnnBackendAttributeName_t attr, bool v, const char* what) {
  set(attr, CUDNN_TYPE_BOOLEAN, 1, &v, what);
}

void Descriptor::set_float(cudnnBackendAttributeName_t attr, float v, const char* what) {
  set(attr, CUDNN_TYPE_FLOAT, 1, &v, what);
}

void Descriptor::set_data_type(cudnnBackendAttributeName_t attr, cudnnDataType_t v,
                               const char* what) {
  set(attr, CUDNN_TYPE_DATA_TYPE, 1, &v, what);
}

void Descriptor::set_descriptor(cudnnBackendAttributeName_t attr, const Descriptor& d,
                                const char* what) {
  cudnnBackendDescriptor_t raw = d.get();
  set(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw, what);
}

void Descriptor::set_descriptors(cudnnBackendAttributeName_t attr,
                                 const std::vector<cudnnBackendDescriptor_t>& ds,
                                 const char* what) {
  set(attr, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<std::int64_t>(ds.size()), ds.data(), what);
}

void Descriptor::finalize(const char* what) {
  check(cudnnBackendFinalize(desc_), std::string("finalizing ") + what);
}

cudnnStatus_t Descriptor::try_finalize() {
  return cudnnBackendFinalize(desc_);
}

std::int64_t Descriptor::get_int64(cudnnBackendAttributeName_t attr, const char* what) const {
  std::int64_t value = 0;
  std::int64_t count = 0;
  check(cudnnBackendGetAttribute(desc_, attr, CUDNN_TYPE_INT64, 1, &count, &value),
        std::string("reading ") + what);
  return value;
}

}  // namespace tinyllama::cuda::cudnn
