#pragma once
// A model's shape as JSON, the same keys wherever a report names the model
// (train --json, the profile's summary.json, tune and validate reports).
#include <nlohmann/json_fwd.hpp>

#include "model/config.h"

namespace tinyllama {

// {"vocab_size", "hidden_dim", "num_layers", "num_heads", "num_kv_heads",
//  "ffn_dim"}; callers add the batch shape and whatever else they report.
nlohmann::json model_shape_json(const ModelConfig& m);

}  // namespace tinyllama
