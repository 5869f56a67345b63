#include "prof/traced_step.h"

namespace tinyllama::prof {

void trace_step(Model& model, AccessTraceBackend& backend, bool scaled_loss, int micro_batches) {
  const AccessTraceBackend::Recording recording(backend);
  model.stage_step(1.0f, scaled_loss, AdamWHyper{});
  for (int m = 0; m < micro_batches; ++m) {
    model.select_micro_batch(m);
    model.forward_pass();
    model.backward_pass(/*update_layers=*/true);
    model.accumulate_gradients();
  }
  model.optimizer_pass();
}

}  // namespace tinyllama::prof
