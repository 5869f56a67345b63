#pragma once
// The ablation table: each point run with one plan choice switched, against
// the same point as its preset runs it. A positive effect means the switched
// run was slower, i.e. what the preset's choice saves.
#include <string>
#include <vector>

#include "bench_suite/results.h"

namespace tinyllama::suite {

struct AblationRow {
  std::string base_key;  // the preset's point ("v2 bf16 B8 S128")
  std::string switched;  // the choice switched ("qkv_fusion off")
  bool ok = false;       // both runs measured
  std::string error;     // else why not
  double base_ms = 0;
  double switched_ms = 0;
  double effect_ms() const { return switched_ms - base_ms; }
  double effect_pct() const { return base_ms > 0 ? 100 * effect_ms() / base_ms : 0; }
};

// One row per point with a switched choice, in the order of `points`; its
// base is the point of the same model, level, precision and shape with none.
std::vector<AblationRow> ablation_rows(const std::vector<PointResult>& points);

// "| point | switched | ms/step | preset ms/step | effect ms | effect % |".
std::string ablation_markdown(const std::vector<AblationRow>& rows);

}  // namespace tinyllama::suite
