// Defaults for backends without whole-step graphs: asking one to capture is
// a programming error (callers check supports_graphs() first). And the fused
// optimizer sweep as the composition of its primitives, the reference.
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

void Backend::replay() {
  throw RuntimeFailure("the " + name() + " backend has no captured graph to replay");
}

}  // namespace tinyllama
