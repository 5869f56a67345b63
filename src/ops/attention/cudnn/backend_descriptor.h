#pragma once
// The cuDNN backend API through one RAII type. Every object of the backend
// graph API (tensors, operations, graphs, engine configs, plans, variant
// packs) is a cudnnBackendDescriptor_t that is created, given attributes,
// finalized and destroyed; this wrapper owns one, and every call goes
// through `check`, which turns a failing status into a RuntimeFailure that
// carries cuDNN's own explanation (cudnnGetLastErrorString): the status
// alone ("CUDNN_STATUS_NOT_SUPPORTED") rarely says which attribute or
// limit was at fault.
#include <cudnn.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tinyllama::cuda::cudnn {

// Throws RuntimeFailure("cuDNN: <what> failed: <status>: <cuDNN's message>")
// unless status is CUDNN_STATUS_SUCCESS.
void check(cudnnStatus_t status, const std::string& what);

// cuDNN's last error message for this thread ("" when none), and clears it.
std::string last_error_message();

// The runtime library's version as "9.14.0" (cudnnGetVersion), which can
// differ from the headers this was built with.
std::string runtime_version_string();

class Descriptor {
 public:
  Descriptor() = default;
  explicit Descriptor(cudnnBackendDescriptorType_t type);
  ~Descriptor();
  Descriptor(Descriptor&& other) noexcept;
  Descriptor& operator=(Descriptor&& other) noexcept;
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return desc_; }
  bool empty() const { return desc_ == nullptr; }

  // Typed setters: `what` names the attribute in error messages.
  void set(cudnnBackendAttributeName_t attr, cudnnBackendAttributeType_t type, std::int64_t count,
           const void* values, const char* what);
  void set_int64(cudnnBackendAttributeName_t attr, std::int64_t v, const char* what);
  void set_int64s(cudnnBackendAttributeName_t attr, const std::vector<std::int64_t>& v,
                  const char* what);
  void set_bool(cudnnBackendAttributeName_t attr, bool v, const char* what);
  void set_float(cudnnBackendAttributeName_t attr, float v, const char* what);
  void set_data_type(cudnnBackendAttributeName_t attr, cudnnDataType_t v, const char* what);
  void set_descriptor(cudnnBackendAttributeName_t attr, const Descriptor& d, const char* what);
  void set_descriptors(cudnnBackendAttributeName_t attr,
                       const std::vector<cudnnBackendDescriptor_t>& ds, const char* what);

  // cudnnBackendFinalize; throws with cuDNN's reason.
  void finalize(const char* what);
  // cudnnBackendFinalize, returning the status instead of throwing (plan
  // selection tries engine configs until one finalizes).
  cudnnStatus_t try_finalize();

  std::int64_t get_int64(cudnnBackendAttributeName_t attr, const char* what) const;

 private:
  cudnnBackendDescriptor_t desc_ = nullptr;
};

}  // namespace tinyllama::cuda::cudnn
