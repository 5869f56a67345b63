#include "prof/cost_model.h"

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "model/model.h"
#include "prof/access_trace.h"
#include "prof/traced_step.h"

namespace tinyllama::prof {
namespace {

using i64 = std::int64_t;

// "forward/layer3/qkv_gemm" -> phase "forward", layer 3, op "qkv_gemm".
OpCost op_at(const std::string& path, const CallCost& cost) {
  OpCost o;
  o.path = path;
  const std::size_t first = path.find('/');
  o.phase = path.substr(0, first);
  std::string rest = first == std::string::npos ? std::string() : path.substr(first + 1);
  if (rest.rfind("layer", 0) == 0) {
    const std::size_t slash = rest.find('/');
    o.layer = std::stoi(rest.substr(5, slash - 5));
    rest = slash == std::string::npos ? std::string() : rest.substr(slash + 1);
  }
  o.op = rest;
  o.kind = cost.kind;
  o.flops = cost.flops;
  o.bytes = cost.bytes;
  o.write_bytes = cost.write_bytes;
  o.gemm_calls = cost.gemms;
  return o;
}

// The recorded ops as cost entries, one per marker path (a path opened
// several times -- each micro-batch's, each chunk's -- summed where it was
// first seen), without the ops that cost nothing (the loss readback).
StepCost collect(const std::vector<TracedOp>& traced) {
  StepCost sc;
  std::map<std::string, std::size_t> at;  // path -> its entry in sc.ops
  for (const TracedOp& t : traced) {
    if (t.cost.flops == 0 && t.cost.bytes == 0) continue;
    const auto [it, added] = at.emplace(t.name, sc.ops.size());
    if (added) {
      sc.ops.push_back(op_at(t.name, t.cost));
      continue;
    }
    OpCost& o = sc.ops[it->second];
    o.flops += t.cost.flops;
    o.bytes += t.cost.bytes;
    o.write_bytes += t.cost.write_bytes;
    o.gemm_calls += t.cost.gemms;
  }
  return sc;
}

}  // namespace

std::int64_t StepCost::model_flops() const {
  return gemm_flops() + attention_flops();
}

std::int64_t StepCost::gemm_flops() const {
  i64 f = 0;
  for (const OpCost& o : ops) f += o.kind == OpKind::Gemm ? o.flops : 0;
  return f;
}

std::int64_t StepCost::attention_flops() const {
  i64 f = 0;
  for (const OpCost& o : ops) f += o.kind == OpKind::Attention ? o.flops : 0;
  return f;
}

std::int64_t StepCost::total_flops() const {
  i64 f = 0;
  for (const OpCost& o : ops) f += o.flops;
  return f;
}

std::int64_t StepCost::total_bytes() const {
  i64 b = 0;
  for (const OpCost& o : ops) b += o.bytes;
  return b;
}

const OpCost* StepCost::find(const std::string& path) const {
  for (const OpCost& o : ops) {
    if (o.path == path) return &o;
  }
  return nullptr;
}

std::int64_t matmul_parameters(const ModelConfig& cfg) {
  const i64 d = cfg.hidden_dim;
  const i64 per_layer = static_cast<i64>(cfg.qkv_dim()) * d + d * cfg.q_dim() + 3 * d * cfg.ffn_dim;
  return static_cast<i64>(cfg.vocab_size) * d + cfg.num_layers * per_layer;
}

std::int64_t attention_training_flops(const ModelConfig& cfg, BatchShape shape) {
  const i64 s = shape.seq;
  return 6 * static_cast<i64>(cfg.num_layers) * shape.batch * cfg.num_heads * s * s *
         cfg.head_dim();
}

StepCost step_cost(const ModelConfig& cfg, BatchShape shape, const StepPlan& plan) {
  // One rank's step: the exchanges between ranks move no model work.
  StepPlan single = plan;
  single.parallel = DataParallel{};
  AccessTraceBackend backend(DeviceCaps::cpu());
  Model model(cfg, shape, single, backend);
  trace_step(model, backend, plan.loss_scaling == LossScaling::Dynamic, model.micro_batches());
  StepCost sc = collect(backend.ops());
  sc.tokens = shape.tokens() * model.micro_batches();
  return sc;
}

}  // namespace tinyllama::prof
