#pragma once
// Every op the kernel bench can run, with its variants side by side.
// Adding a variant is adding one entry to the list in op_registry.cc: its
// op name, its variant name, the cost model's path for the op, the
// implementation choices it runs under, and the function that makes its
// case.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench/op_case.h"
#include "bench/op_cost.h"

namespace tinyllama::bench {

struct OpVariant {
  std::string op;         // "attention.fwd": the family, a dot, the pass
  std::string variant;    // "flash"; "" when the op has one implementation
  std::string cost_path;  // the cost model's op it runs, "forward/layer0/attention"
  ImplChoice impl;        // told to Backend::prepare and to the cost model
  std::function<std::unique_ptr<OpCase>(BenchContext&)> make;

  std::string family() const;  // "attention"
  std::string label() const;   // "attention.fwd flash"
};

// In the order a training step runs the ops; variants of an op adjacent.
const std::vector<OpVariant>& registry();

// --ops: comma-separated items, each an op ("attention.fwd"), a family
// ("attention": both passes), "gemm" (every GEMM), or either form with
// ":variant" ("attention.fwd:flash"). Entries in registry order, each once.
// Throws UsageError naming --ops and what is allowed.
std::vector<const OpVariant*> select_ops(const std::string& list);

// The cost model's ops (as OpCost::kind_key(), "forward/ffn_norm") that no
// entry names, each with where its kernel is measured instead or why it is
// not. The tests check that every op of the cost model is an entry's or
// listed here, so a new op in the cost model asks for a bench entry.
const std::vector<std::pair<std::string, std::string>>& ops_measured_elsewhere();

}  // namespace tinyllama::bench
