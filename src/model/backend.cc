// Defaults for backends without whole-step graphs: asking one to capture is
// a programming error (callers check supports_graphs() first).
#include "model/backend.h"

#include "core/errors.h"

namespace tinyllama {

void Backend::begin_capture() {
  throw RuntimeFailure("the " + name() + " backend cannot capture graphs");
}

GraphStats Backend::end_capture(bool /*instantiate*/) {
  throw RuntimeFailure("the " + name() + " backend cannot capture graphs");
}

void Backend::replay() {
  throw RuntimeFailure("the " + name() + " backend has no captured graph to replay");
}

}  // namespace tinyllama
