#pragma once
// The shapes the kernel bench runs at: DESIGN §5's presets (the workshop's
// model at B8 S128 and at B32 S1024, and the 1 B-parameter config), each
// optionally changed by the model and batch flags, so any shape a user
// trains can be benched too.
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"

namespace tinyllama::bench {

struct BenchShape {
  std::string name;  // "workshop", "big", "1b"
  ModelConfig cfg;
  BatchShape batch;
  // "D512 L8 H8 K4 hd64 F2048 V1000, B8 S128 (1024 tokens)"
  std::string describe() const;
};

// The presets by name, in the order `--config all` runs them.
const std::vector<BenchShape>& preset_shapes();
std::vector<std::string> preset_names();

// Flags that change every selected preset; unset ones keep the preset's
// value. As in `tinyllama train`, --num-heads without --num-kv-heads gives
// K = H/2 (H when H is odd) and --hidden-dim without --ffn-dim gives 4·D.
struct ShapeOverrides {
  std::optional<int> hidden_dim, num_heads, num_kv_heads, ffn_dim, vocab_size, batch_size, seq_len;
  bool any() const;
};

// Throws UsageError naming the flag when the result is not a valid model
// or batch (the same rules and messages as `tinyllama train`).
BenchShape apply_overrides(BenchShape preset, const ShapeOverrides& o);

// "workshop,1b" or "all" -> the presets, in the order given (duplicates
// dropped). Throws UsageError naming --config and the allowed names.
std::vector<BenchShape> parse_configs(const std::string& text);

// Splits "a,b,,c" into {"a", "b", "c"} (spaces trimmed, empties dropped).
std::vector<std::string> split_list(const std::string& text);

}  // namespace tinyllama::bench
