// The process-wide cache of CudnnSdpa, and the support query built on it.
// Plans take from a fraction of a second to seconds to build (the engines
// are compiled at run time), so each (device, layout) is built once; a
// layout cuDNN refused is remembered with its reason, so asking again does
// not rebuild (and refuse) it again.
#include <memory>
#include <mutex>
#include <vector>

#include "core/errors.h"
#include "ops/attention/cudnn/cudnn_handle.h"
#include "ops/attention/cudnn/cudnn_sdpa.h"
#include "ops/attention/cudnn/sdpa_checks.h"

namespace tinyllama::cuda {

namespace {

struct Entry {
  int device = -1;
  SdpaLayout layout;
  std::unique_ptr<CudnnSdpa> sdpa;  // null when building failed
  std::string error;
};

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}

// Entries are never removed, so the references handed out stay valid.
// Leaked on purpose: plans destroyed after the CUDA runtime shut down at
// exit could fail.
std::vector<std::unique_ptr<Entry>>& cache() {
  static auto* entries = new std::vector<std::unique_ptr<Entry>>();
  return *entries;
}

}  // namespace

const CudnnSdpa& cudnn_sdpa_for(const SdpaLayout& layout) {
  const int device = cudnn::current_device();
  // Building happens under the lock: two threads asking for one new layout
  // build it once, and plan building is rare (start-up) anyway.
  const std::lock_guard<std::mutex> lock(cache_mutex());
  for (const auto& e : cache()) {
    if (e->device == device && e->layout == layout) {
      if (!e->sdpa) throw RuntimeFailure(e->error);
      return *e->sdpa;
    }
  }
  auto entry = std::make_unique<Entry>();
  entry->device = device;
  entry->layout = layout;
  try {
    entry->sdpa = std::make_unique<CudnnSdpa>(layout);
  } catch (const std::exception& e) {
    entry->error = e.what();
  }
  Entry& stored = *cache().emplace_back(std::move(entry));
  if (!stored.sdpa) throw RuntimeFailure(stored.error);
  return *stored.sdpa;
}

std::string cudnn_sdpa_unsupported(const SdpaLayout& layout) {
  try {
    const std::string problem = cudnn::layout_problem(layout);
    if (!problem.empty()) return problem;
    cudnn_sdpa_for(layout);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "cuDNN SDPA (" + cudnn::layout_name(layout) + "): unknown failure";
  }
}

}  // namespace tinyllama::cuda
