#pragma once
// The GEMM algorithms chosen by timing, kept for the whole process and
// shared by every GemmRunner (the key holds the device), so that two
// backends run the same algorithms; and their text form, which a checkpoint
// carries so that a resumed run reruns them (GemmRunner's
// export_tuned_choices / import_tuned_choices, defined beside the store in
// cuda_gemm_tuned.cc). cublasLtMatmulAlgo_t is plain data, valid with any
// handle of one library.
#include <cublasLt.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>

namespace tinyllama::cuda {

// A GEMM problem as GemmRunner keys it (cuda_gemm.cu's KeyField order).
using GemmTuningKey = std::array<std::int64_t, 22>;

struct TunedGemmAlgos {
  std::mutex mutex;
  std::map<GemmTuningKey, cublasLtMatmulAlgo_t> algos;
  // Bumped by each import: a GemmRunner's plans made before it look their
  // algorithm up again (a data-parallel rank adopting rank 0's choices
  // after the first step, model/data_parallel.h).
  std::atomic<std::uint64_t> imports{0};
};

TunedGemmAlgos& tuned_gemm_algos();

}  // namespace tinyllama::cuda
