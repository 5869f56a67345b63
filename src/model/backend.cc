// Defaults for backends without whole-step graphs: asking one to capture is
// a programming error (callers check supports_graphs() first). The fused
// optimizer sweep as the composition of its primitives, the reference; and
// side GEMMs that run at once, in order.
#include "model/backend.h"

#include "core/errors.h"

namespace tinyllama {

void Backend::begin_capture() {
  throw RuntimeFailure("the " + name() + " backend cannot capture graphs");
}

GraphStats Backend::end_capture(bool /*instantiate*/) {
  throw RuntimeFailure("the " + name() + " backend cannot capture graphs");
}

void Backend::adamw_fused(Mat param, Mat grad, Mat m, Mat v, Mat compute_copy,
                          const AdamWHyper& hp) {
  adamw(param, grad, m, v, hp);
  if (!compute_copy.empty()) convert(compute_copy, param);
}

std::int64_t Backend::side_gemm(Mat c, Mat a, bool trans_a, Mat b, bool trans_b, float alpha,
                                float beta) {
  gemm(c, a, trans_a, b, trans_b, alpha, beta);
  return 0;
}

void Backend::replay() {
  throw RuntimeFailure("the " + name() + " backend has no captured graph to replay");
}

}  // namespace tinyllama
