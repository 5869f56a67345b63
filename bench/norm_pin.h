#pragma once
// The RMSNorm backward's process-wide pins (cuda_ops.h), held for one run of
// a bench case: the variants the current kernels replaced, timed beside them.
#include "bench/op_factories.h"
#if defined(TINYLLAMA_HAS_CUDA)
#include "cuda/cuda_ops.h"
#endif

namespace tinyllama::bench {

class ScopedNormPin {
 public:
  explicit ScopedNormPin(NormBackwardPin pin) { set(pin); }
  ~ScopedNormPin() { set(NormBackwardPin::None); }
  ScopedNormPin(const ScopedNormPin&) = delete;
  ScopedNormPin& operator=(const ScopedNormPin&) = delete;

 private:
  static void set(NormBackwardPin pin) {
#if defined(TINYLLAMA_HAS_CUDA)
    cuda::set_rmsnorm_partial_sums_in_kernel(pin != NormBackwardPin::SeparateSum);
    cuda::set_rmsnorm_backward_teams(pin != NormBackwardPin::OneWarp);
#else
    (void)pin;
#endif
  }
};

}  // namespace tinyllama::bench
