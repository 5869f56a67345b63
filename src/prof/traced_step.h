#pragma once
// One training step's device work run on the access-trace backend, as
// StepRunner::enqueue_work enqueues it: the staged scalars, each micro-batch's
// forward, backward and accumulation, then the update. The memory timeline
// and the cost model both read the ops it records.
#include "model/model.h"
#include "prof/access_trace.h"

namespace tinyllama::prof {

// `micro_batches` of the model's (the memory timeline traces one: the
// arena is the same for each).
void trace_step(Model& model, AccessTraceBackend& backend, bool scaled_loss, int micro_batches);

}  // namespace tinyllama::prof
