#pragma once
// From a finalized operation graph to an execution plan, and running one.
//
// cuDNN's heuristics rank the engine configurations that claim the graph;
// a configuration can still fail to finalize into a plan (a runtime-compiled
// engine may reject the shape only when it compiles), so they are tried in
// order until one does. The plan's workspace size is read once here and
// planned by the caller: nothing is allocated at execution.
#include <cudnn.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ops/attention/cudnn/backend_descriptor.h"

namespace tinyllama::cuda::cudnn {

struct ExecutionPlan {
  Descriptor config;  // the engine configuration the plan was built from
  Descriptor plan;
  std::int64_t workspace_bytes = 0;
  std::int64_t engine_index = -1;  // cuDNN's global engine index, for messages
  double build_seconds = 0;        // heuristics + finalize (engine compilation)
};

// The first configuration of heuristics mode A, then of the fallback list,
// that finalizes. RuntimeFailure with cuDNN's reasons when none does.
ExecutionPlan build_plan(cudnnHandle_t handle, const Descriptor& graph, const std::string& what);

// Binds uids[i] to pointers[i] (device memory, or host memory for by-value
// scalars) and enqueues the plan on the handle's current stream. Host work
// only: no allocation, no synchronisation (capturable).
void execute(cudnnHandle_t handle, const ExecutionPlan& plan, const std::vector<std::int64_t>& uids,
             const std::vector<void*>& pointers, void* workspace, const std::string& what);

}  // namespace tinyllama::cuda::cudnn
