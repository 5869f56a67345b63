#include "bench/shapes.h"

#include <algorithm>
#include <cstdint>
#include <sstream>

#include "core/errors.h"

namespace tinyllama::bench {
namespace {

BenchShape preset(std::string name, int d, int layers, int heads, int kv_heads, int ffn, int vocab,
                  int batch, int seq) {
  BenchShape s;
  s.name = std::move(name);
  s.cfg.hidden_dim = d;
  s.cfg.num_layers = layers;
  s.cfg.num_heads = heads;
  s.cfg.num_kv_heads = kv_heads;
  s.cfg.ffn_dim = ffn;
  s.cfg.vocab_size = vocab;
  s.batch = BatchShape{batch, seq};
  return s;
}

}  // namespace

std::string BenchShape::describe() const {
  std::ostringstream os;
  os << "D" << cfg.hidden_dim << " L" << cfg.num_layers << " H" << cfg.num_heads << " K"
     << cfg.num_kv_heads << " hd" << cfg.head_dim() << " F" << cfg.ffn_dim << " V" << cfg.vocab_size
     << ", B" << batch.batch << " S" << batch.seq << " (" << batch.tokens() << " tokens)";
  return os.str();
}

const std::vector<BenchShape>& preset_shapes() {
  // DESIGN §5's benchmark rows. F is the DESIGN default 4·D in all three.
  static const std::vector<BenchShape> presets = {
      preset("workshop", 512, 8, 8, 4, 2048, 1000, 8, 128),
      preset("big", 512, 8, 8, 4, 2048, 1000, 32, 1024),
      preset("1b", 2048, 16, 32, 16, 8192, 32000, 8, 1024),
  };
  return presets;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const BenchShape& s : preset_shapes()) names.push_back(s.name);
  return names;
}

bool ShapeOverrides::any() const {
  return hidden_dim || num_heads || num_kv_heads || ffn_dim || vocab_size || batch_size || seq_len;
}

BenchShape apply_overrides(BenchShape s, const ShapeOverrides& o) {
  ModelConfig& m = s.cfg;
  if (o.hidden_dim) {
    m.hidden_dim = *o.hidden_dim;
    if (!o.ffn_dim) m.ffn_dim = ModelConfig::default_ffn_dim(m.hidden_dim);
  }
  if (o.num_heads) {
    m.num_heads = *o.num_heads;
    if (!o.num_kv_heads) m.num_kv_heads = ModelConfig::default_kv_heads(m.num_heads);
  }
  if (o.num_kv_heads) m.num_kv_heads = *o.num_kv_heads;
  if (o.ffn_dim) m.ffn_dim = *o.ffn_dim;
  if (o.vocab_size) m.vocab_size = *o.vocab_size;
  if (o.batch_size) s.batch.batch = *o.batch_size;
  if (o.seq_len) s.batch.seq = *o.seq_len;
  m.validate();
  if (s.batch.batch < 1) {
    throw UsageError("--batch-size " + std::to_string(s.batch.batch) + ": must be at least 1");
  }
  if (s.batch.seq < 2) {
    throw UsageError("--seq-len " + std::to_string(s.batch.seq) + ": must be at least 2");
  }
  return s;
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    const auto first = item.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    const auto last = item.find_last_not_of(" \t");
    items.push_back(item.substr(first, last - first + 1));
  }
  return items;
}

std::vector<BenchShape> parse_configs(const std::string& text) {
  const std::vector<std::string> names = preset_names();
  std::vector<std::string> chosen;
  for (const std::string& item : split_list(text)) {
    if (item == "all") {
      chosen.insert(chosen.end(), names.begin(), names.end());
    } else if (std::find(names.begin(), names.end(), item) != names.end()) {
      chosen.push_back(item);
    } else {
      throw UsageError("--config " + text + ": unknown config '" + item +
                       "'; expected workshop, big, 1b or all (comma-separated)");
    }
  }
  if (chosen.empty()) {
    throw UsageError("--config " + text + ": expected workshop, big, 1b or all (comma-separated)");
  }
  std::vector<BenchShape> out;
  for (const std::string& name : chosen) {
    const bool seen =
        std::any_of(out.begin(), out.end(), [&](const BenchShape& s) { return s.name == name; });
    if (seen) continue;
    for (const BenchShape& s : preset_shapes()) {
      if (s.name == name) out.push_back(s);
    }
  }
  return out;
}

}  // namespace tinyllama::bench
