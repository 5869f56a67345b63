#include "model/config_json.h"

#include <nlohmann/json.hpp>

namespace tinyllama {

nlohmann::json model_shape_json(const ModelConfig& m) {
  return {{"vocab_size", m.vocab_size},     {"hidden_dim", m.hidden_dim},
          {"num_layers", m.num_layers},     {"num_heads", m.num_heads},
          {"num_kv_heads", m.num_kv_heads}, {"ffn_dim", m.ffn_dim}};
}

}  // namespace tinyllama
