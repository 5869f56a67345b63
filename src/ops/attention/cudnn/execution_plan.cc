#include "ops/attention/cudnn/execution_plan.h"

#include <algorithm>
#include <chrono>

#include "core/errors.h"

namespace tinyllama::cuda::cudnn {

namespace {

const char* mode_name(cudnnBackendHeurMode_t mode) {
  return mode == CUDNN_HEUR_MODE_A ? "heuristics mode A" : "fallback list";
}

// The engine configurations heuristics `mode` proposes for the graph, best
// first; none (and why, in `why`) when the mode cannot rank this graph.
std::vector<Descriptor> engine_configs(const Descriptor& graph, cudnnBackendHeurMode_t mode,
                                       std::string& why) {
  std::vector<Descriptor> configs;
  Descriptor heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_descriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph, "heuristics graph");
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, "heuristics mode");
  if (heur.try_finalize() != CUDNN_STATUS_SUCCESS) {
    why += std::string(mode_name(mode)) + ": " + last_error_message() + "; ";
    return configs;
  }
  // Ask for the count, then fill that many engine-config descriptors.
  std::int64_t count = 0;
  check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
        "counting heuristics results");
  if (count <= 0) {
    why += std::string(mode_name(mode)) + ": no engine claims the graph; ";
    return configs;
  }
  std::vector<cudnnBackendDescriptor_t> raw;
  for (std::int64_t i = 0; i < count; ++i) {
    raw.push_back(configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR).get());
  }
  std::int64_t returned = 0;
  check(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned, raw.data()),
        "reading heuristics results");
  if (returned < count)
    configs.resize(static_cast<std::size_t>(std::max<std::int64_t>(returned, 0)));
  return configs;
}

// cuDNN's global index of the engine behind a configuration (-1 if unreadable).
std::int64_t engine_index(const Descriptor& config) {
  try {
    Descriptor engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
    cudnnBackendDescriptor_t raw = engine.get();
    std::int64_t n = 0;
    if (cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                 &raw) != CUDNN_STATUS_SUCCESS) {
      return -1;
    }
    return engine.get_int64(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, "engine index");
  } catch (const RuntimeFailure&) {
    last_error_message();  // clear it: this was only for a message
    return -1;
  }
}

}  // namespace

ExecutionPlan build_plan(cudnnHandle_t handle, const Descriptor& graph, const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  std::string why;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    for (Descriptor& config : engine_configs(graph, mode, why)) {
      Descriptor plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle, "plan handle");
      plan.set_descriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config, "plan engine config");
      if (plan.try_finalize() != CUDNN_STATUS_SUCCESS) {
        why +=
            "engine " + std::to_string(engine_index(config)) + ": " + last_error_message() + "; ";
        continue;
      }
      ExecutionPlan out;
      out.workspace_bytes =
          plan.get_int64(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, "plan workspace size");
      out.engine_index = engine_index(config);
      out.config = std::move(config);
      out.plan = std::move(plan);
      out.build_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return out;
    }
  }
  if (why.size() >= 2) why.resize(why.size() - 2);
  throw RuntimeFailure("cuDNN: no engine builds a plan for the " + what + " graph (cuDNN " +
                       runtime_version_string() + "): " + (why.empty() ? "no reason given" : why));
}

void execute(cudnnHandle_t handle, const ExecutionPlan& plan, const std::vector<std::int64_t>& uids,
             const std::vector<void*>& pointers, void* workspace, const std::string& what) {
  Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
  pack.set_int64s(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, uids, "variant pack uids");
  pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
           static_cast<std::int64_t>(pointers.size()), pointers.data(), "variant pack pointers");
  pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace,
           "variant pack workspace");
  pack.finalize("variant pack");
  check(cudnnBackendExecute(handle, plan.plan.get(), pack.get()),
        "executing the " + what + " plan");
}

}  // namespace tinyllama::cuda::cudnn
