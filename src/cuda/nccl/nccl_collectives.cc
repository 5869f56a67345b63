#include "cuda/nccl/nccl_collectives.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>

#include "core/errors.h"
#include "device/cuda_check.h"
#include "device/cuda_env.h"

namespace tinyllama {
namespace {

[[noreturn]] void nccl_failure(const char* call, ncclResult_t r, ncclComm_t comm) {
  std::string why = ncclGetErrorString(r);
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') why += " (" + std::string(last) + ")";
  }
  throw RuntimeFailure(std::string("NCCL: ") + call + " failed: " + why);
}

#define NCCL_CHECK(call, comm)                                        \
  do {                                                                \
    const ncclResult_t tl_nccl_ = (call);                             \
    if (tl_nccl_ != ncclSuccess) nccl_failure(#call, tl_nccl_, comm); \
  } while (0)

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32:
      return ncclFloat32;
    case DType::F64:
      return ncclFloat64;
    case DType::BF16:
      return ncclBfloat16;
    case DType::F16:
      return ncclFloat16;
  }
  throw std::invalid_argument("NCCL: no such dtype");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Sum:
      break;
  }
  return ncclSum;
}

char* offset(void* data, std::int64_t elements, DType t) {
  return static_cast<char*>(data) + elements * static_cast<std::int64_t>(dtype_size(t));
}

class NcclCollectives : public Collectives {
 public:
  NcclCollectives(int rank, int world, const std::vector<std::uint8_t>& id)
      : rank_(rank), world_(world) {
    ncclUniqueId uid;
    if (id.size() != sizeof uid.internal) {
      throw RuntimeFailure("NCCL: the rendezvous gave " + std::to_string(id.size()) +
                           " bytes, not a unique id of " + std::to_string(sizeof uid.internal));
    }
    std::memcpy(uid.internal, id.data(), sizeof uid.internal);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    // Zero CTAs: every collective NCCL can run on the copy engines does
    // (2.28: all-gathers between symmetric windows on one NVLink domain).
    if (zero_cta_) config.CTAPolicy = NCCL_CTA_POLICY_ZERO;
    NCCL_CHECK(ncclCommInitRankConfig(&comm_, world, uid, rank, &config), nullptr);
  }
  ~NcclCollectives() override {
    if (comm_ == nullptr) return;
    for (auto& [window, handle] : windows_) {
      ncclCommWindowDeregister(comm_, handle);
      ncclMemFree(window);
    }
    // Work still queued would be waited for; a failed run aborts instead.
    if (ncclCommFinalize(comm_) != ncclSuccess) {
      ncclCommAbort(comm_);
      return;
    }
    ncclCommDestroy(comm_);
  }
  NcclCollectives(const NcclCollectives&) = delete;
  NcclCollectives& operator=(const NcclCollectives&) = delete;

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  // "in symmetric windows" once the model's buffers lie in them: the
  // reduce-scatters on NCCL's symmetric kernels, the gathers on the copy
  // engines (else ring kernels on ordinary memory).
  std::string description() const override {
    std::string out = "nccl " + nccl_version();
    if (!windows_.empty()) out += " in symmetric windows";
    return out;
  }

  void all_reduce(void* data, std::int64_t count, DType dtype, ReduceOp op, void* stream) override {
    NCCL_CHECK(ncclAllReduce(data, data, static_cast<std::size_t>(count), nccl_type(dtype),
                             nccl_op(op), comm_, static_cast<cudaStream_t>(stream)),
               comm_);
  }
  void reduce_scatter(void* data, std::int64_t shard, DType dtype, ReduceOp op,
                      void* stream) override {
    // In place: this rank's block of the input is the output.
    NCCL_CHECK(
        ncclReduceScatter(data, offset(data, rank_ * shard, dtype), static_cast<std::size_t>(shard),
                          nccl_type(dtype), nccl_op(op), comm_, static_cast<cudaStream_t>(stream)),
        comm_);
  }
  void all_gather(void* data, std::int64_t shard, DType dtype, void* stream) override {
    NCCL_CHECK(
        ncclAllGather(offset(data, rank_ * shard, dtype), data, static_cast<std::size_t>(shard),
                      nccl_type(dtype), comm_, static_cast<cudaStream_t>(stream)),
        comm_);
  }
  void all_reduce_max(std::int32_t* flag, void* stream) override {
    NCCL_CHECK(
        ncclAllReduce(flag, flag, 1, ncclInt32, ncclMax, comm_, static_cast<cudaStream_t>(stream)),
        comm_);
  }
  // Where NCCL cannot make the window (no cuMem, windows disabled), the
  // caller's ordinary memory serves: the gathers then run as kernels.
  void* allocate_window(std::size_t bytes) override {
    if (!zero_cta_) return nullptr;
    void* window = nullptr;
    ncclResult_t r = ncclMemAlloc(&window, bytes);
    ncclWindow_t handle{};
    if (r == ncclSuccess) {
      r = ncclCommWindowRegister(comm_, window, bytes, &handle, NCCL_WIN_COLL_SYMMETRIC);
      if (r != ncclSuccess) ncclMemFree(window);
    }
    if (r != ncclSuccess) {
      std::fprintf(stderr,
                   "note: NCCL could not make a symmetric window (%s): the collectives run as "
                   "NCCL's ring kernels on ordinary memory\n",
                   ncclGetErrorString(r));
      zero_cta_ = false;
      return nullptr;
    }
    windows_.emplace(window, handle);
    return window;
  }
  void release_window(void* window) override {
    const auto it = windows_.find(window);
    if (it == windows_.end()) return;
    // Called from destructors: nothing to throw to; a failure leaves the
    // memory to the process's end.
    if (ncclCommWindowDeregister(comm_, it->second) == ncclSuccess) ncclMemFree(window);
    windows_.erase(it);
  }
  std::string text_from_rank0(const std::string& text) override {
    std::int64_t size = rank_ == 0 ? static_cast<std::int64_t>(text.size()) : 0;
    broadcast(&size, sizeof size);
    std::string out = rank_ == 0 ? text : std::string(static_cast<std::size_t>(size), '\0');
    if (size > 0) broadcast(out.data(), out.size());
    return out;
  }

 private:
  // Rank 0's host[0, bytes) into every rank's host[0, bytes), through a
  // device buffer on a stream of its own; returns when it has arrived.
  void broadcast(void* host, std::size_t bytes) {
    struct Staging {
      cudaStream_t stream = nullptr;
      void* device = nullptr;
      ~Staging() {
        if (device != nullptr) cudaFree(device);
        if (stream != nullptr) cudaStreamDestroy(stream);
      }
    } s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaMalloc(&s.device, bytes));
    if (rank_ == 0) {
      CUDA_CHECK(cudaMemcpyAsync(s.device, host, bytes, cudaMemcpyHostToDevice, s.stream));
    }
    NCCL_CHECK(ncclBroadcast(s.device, s.device, bytes, ncclUint8, 0, comm_, s.stream), comm_);
    if (rank_ != 0) {
      CUDA_CHECK(cudaMemcpyAsync(host, s.device, bytes, cudaMemcpyDeviceToHost, s.stream));
    }
    CUDA_CHECK(cudaStreamSynchronize(s.stream));
  }

  int rank_;
  int world_;
  // The all-gathered buffers in symmetric windows and the communicator's CTA
  // policy zero, so the gathers run on the copy engines (docs/
  // DATA_PARALLEL.md); TINYLLAMA_NCCL_ZERO_CTA=0 (or off) keeps NCCL's kernels.
  bool zero_cta_ = cuda::env_flag(std::getenv("TINYLLAMA_NCCL_ZERO_CTA"), true);
  ncclComm_t comm_ = nullptr;
  std::map<void*, ncclWindow_t> windows_;
};

}  // namespace

std::string nccl_build_note() {
  return "";
}

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "unknown";
  // NCCL 2.9+: major * 10000 + minor * 100 + patch.
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

std::vector<std::uint8_t> nccl_unique_id() {
  ncclUniqueId uid;
  NCCL_CHECK(ncclGetUniqueId(&uid), nullptr);
  return {reinterpret_cast<const std::uint8_t*>(uid.internal),
          reinterpret_cast<const std::uint8_t*>(uid.internal) + sizeof uid.internal};
}

void select_cuda_device(int device) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw RuntimeFailure("data parallel: no CUDA device is available");
  }
  if (device < 0 || device >= count) {
    throw RuntimeFailure("data parallel: local rank " + std::to_string(device) + " needs GPU " +
                         std::to_string(device) + ", this host has " + std::to_string(count) +
                         " (lower --gpus, or check LOCAL_RANK / CUDA_VISIBLE_DEVICES)");
  }
  CUDA_CHECK(cudaSetDevice(device));
}

std::unique_ptr<Collectives> make_nccl_collectives(int rank, int world,
                                                   const std::vector<std::uint8_t>& id) {
  // NVLink SHARP multicast stays off in every run (also for a process a
  // launcher started with an environment of its own).
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);
  return std::make_unique<NcclCollectives>(rank, world, id);
}

}  // namespace tinyllama
