// nccl_collectives.h for a build without NCCL (or without CUDA): data
// parallel is refused with the reason; nothing here touches NCCL or CUDA.
#include "core/errors.h"
#include "cuda/nccl/nccl_collectives.h"

namespace tinyllama {
namespace {

#ifdef TINYLLAMA_HAS_CUDA
constexpr const char* kNoNccl =
    "this build has no NCCL (nccl.h or libnccl not found; set NCCL_ROOT)";
#else
constexpr const char* kNoNccl = "this build has no CUDA backend, so no NCCL";
#endif

[[noreturn]] void refuse() {
  throw RuntimeFailure(std::string("data parallel: ") + kNoNccl);
}

}  // namespace

std::string nccl_build_note() {
  return kNoNccl;
}
std::string nccl_version() {
  return "none";
}
std::vector<std::uint8_t> nccl_unique_id() {
  refuse();
}
void select_cuda_device(int) {
  refuse();
}
std::unique_ptr<Collectives> make_nccl_collectives(int, int, const std::vector<std::uint8_t>&) {
  refuse();
}

}  // namespace tinyllama
