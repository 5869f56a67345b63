#include "io/hf_directory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/errors.h"
#include "io/hf_tokenizer.h"
#include "io/hf_weights.h"
#include "io/safetensors.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kConfig = "config.json";
constexpr const char* kWeights = "model.safetensors";
constexpr const char* kIndex = "model.safetensors.index.json";

void write_text_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) throw RuntimeFailure(tmp.string() + ": cannot write");
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw RuntimeFailure(path.string() + ": cannot rename the temporary file into place");
  }
}

json read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UsageError(path.string() + ": cannot open");
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    throw UsageError(path.string() + ": not valid JSON (" + e.what() + ")");
  }
}

// One config.json key against the value tinyllama computes with.
class ConfigCheck {
 public:
  ConfigCheck(std::string path, const json& config) : path_(std::move(path)), config_(config) {}

  void integer(const char* key, long long want, const char* flag, const json& fallback = {}) {
    const json& v = get(key, fallback);
    if (!v.is_number_integer() || v.get<long long>() != want) {
      fail(key, v, std::to_string(want), std::string("; run with ") + flag + " " + v.dump());
    }
  }
  void real(const char* key, double want, const json& fallback) {
    const json& v = get(key, fallback);
    if (!v.is_number() || std::abs(v.get<double>() - want) > 1e-12 * std::abs(want)) {
      fail(key, v, json(want).dump(), ", which tinyllama computes with");
    }
  }
  void equals(const char* key, const json& want, const json& fallback, const char* why) {
    const json& v = get(key, fallback);
    if (v != want) fail(key, v, want.dump(), why);
  }
  const json& get(const char* key, const json& fallback) const {
    const auto it = config_.find(key);
    return it == config_.end() ? fallback : *it;
  }

 private:
  [[noreturn]] void fail(const char* key, const json& got, const std::string& want,
                         const std::string& why) const {
    throw UsageError(path_ + ": " + key + " is " + (got.is_null() ? "missing" : got.dump()) +
                     ", expected " + want + why);
  }
  std::string path_;
  const json& config_;
};

void check_config(const fs::path& path, const json& config, const ModelConfig& c) {
  if (!config.is_object()) throw UsageError(path.string() + ": not a JSON object");
  ConfigCheck k(path.string(), config);
  k.equals("model_type", "llama", nullptr, " (tinyllama reads LLaMA models only)");
  k.integer("vocab_size", c.vocab_size, "--vocab-size");
  k.integer("hidden_size", c.hidden_dim, "--hidden-dim");
  k.integer("num_hidden_layers", c.num_layers, "--num-layers");
  k.integer("num_attention_heads", c.num_heads, "--num-heads");
  // LlamaConfig's defaults where a key is absent.
  k.integer("num_key_value_heads", c.num_kv_heads, "--num-kv-heads",
            k.get("num_attention_heads", nullptr));
  k.integer("intermediate_size", c.ffn_dim, "--ffn-dim");
  const json& head_dim = k.get("head_dim", nullptr);
  if (!head_dim.is_null()) {
    k.equals("head_dim", c.head_dim(), nullptr, " (tinyllama's head_dim is hidden_size / heads)");
  }
  k.equals("hidden_act", "silu", "silu", " (tinyllama's MLP is SwiGLU)");
  k.real("rms_norm_eps", c.rms_eps, 1e-6);
  k.real("rope_theta", c.rope_theta, 10000.0);
  k.equals("rope_scaling", nullptr, nullptr, " (tinyllama applies plain RoPE)");
  k.equals("attention_bias", false, false, " (tinyllama's projections have no bias)");
  k.equals("mlp_bias", false, false, " (tinyllama's projections have no bias)");
}

// The weights of a directory: model.safetensors, or the shards its index names.
NamedTensors read_weights(const fs::path& dir, RopeLayout& rope) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (fs::is_regular_file(dir / kWeights, ec)) {
    files.push_back(dir / kWeights);
  } else if (fs::is_regular_file(dir / kIndex, ec)) {
    const json index = read_json(dir / kIndex);
    const auto map = index.find("weight_map");
    if (map == index.end() || !map->is_object()) {
      throw UsageError((dir / kIndex).string() + ": no weight_map object");
    }
    std::set<std::string> shards;
    for (const auto& [name, file] : map->items()) {
      const std::string f = file.is_string() ? file.get<std::string>() : "";
      if (f.empty() || fs::path(f).filename() != fs::path(f) || f == "." || f == "..") {
        throw UsageError((dir / kIndex).string() + ": " + name + " maps to " + file.dump() +
                         ", not a file name in the directory");
      }
      shards.insert(f);
    }
    for (const std::string& f : shards) files.push_back(dir / f);
  } else if (fs::exists(dir / "pytorch_model.bin", ec)) {
    throw UsageError(dir.string() +
                     ": holds pytorch_model.bin only; tinyllama reads safetensors "
                     "(save with save_pretrained(DIR, safe_serialization=True))");
  } else {
    throw UsageError(dir.string() + ": no " + kWeights + " or " + kIndex + " in it");
  }
  NamedTensors all;
  bool first = true;
  for (const fs::path& f : files) {
    if (!fs::is_regular_file(f, ec)) throw UsageError(f.string() + ": no such file");
    const RopeLayout here = rope_layout_of(f.string(), read_safetensors_metadata(f.string()));
    if (!first && here != rope) {
      throw UsageError(f.string() + ": its q/k row layout differs from the other shards'");
    }
    rope = here;
    first = false;
    for (auto& named : read_safetensors(f.string())) all.push_back(std::move(named));
  }
  return all;
}

}  // namespace

json hf_config_json(const ModelConfig& c, int max_positions) {
  return {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_dim},
      {"intermediate_size", c.ffn_dim},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim()},
      {"hidden_act", "silu"},
      {"max_position_embeddings", max_positions},
      {"rms_norm_eps", c.rms_eps},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", nullptr},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"mlp_bias", false},
      {"tie_word_embeddings", true},
      {"initializer_range", 0.02},
      {"pretraining_tp", 1},
      {"use_cache", true},
      // Without a tokenizer no special tokens, so generate() stops only at
      // max_new_tokens; export_hf_directory sets them with one.
      {"bos_token_id", nullptr},
      {"eos_token_id", nullptr},
      {"pad_token_id", nullptr},
      {"torch_dtype", "float32"},
  };
}

void export_hf_directory(const std::string& dir, const ParamLayout& layout,
                         const std::vector<double>& flat, int max_positions,
                         const HfTokenizer* tokenizer) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir, ec)) throw RuntimeFailure(dir + ": cannot create the directory");
  const fs::path d(dir);
  save_hf_weights((d / kWeights).string(), layout, flat);
  json config = hf_config_json(layout.config(), max_positions);
  if (tokenizer != nullptr) {
    write_hf_tokenizer_files(dir, *tokenizer, max_positions);
    add_tokenizer_to_config(config, *tokenizer);
  }
  // Last: a directory with its config.json is complete.
  write_text_atomically(d / kConfig, config.dump(2) + "\n");
}

ModelConfig read_model_config(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw UsageError(path + ": no such file or directory");
  ModelConfig c;
  if (fs::is_directory(path, ec)) {
    const fs::path file = fs::path(path) / kConfig;
    if (!fs::is_regular_file(file, ec)) {
      throw UsageError(path + ": no " + std::string(kConfig) +
                       " in it (a Hugging Face model directory has one)");
    }
    const json config = read_json(file);
    auto integer = [&](const char* key, const json& fallback = nullptr) {
      const auto it = config.find(key);
      const json& v = it == config.end() ? fallback : *it;
      if (!v.is_number_integer() || v.get<long long>() < 1 || v.get<long long>() > 1 << 30) {
        throw UsageError(file.string() + ": " + key + " is " +
                         (v.is_null() ? "missing" : v.dump()) + ", expected a positive integer");
      }
      return v.get<int>();
    };
    c.vocab_size = integer("vocab_size");
    c.hidden_dim = integer("hidden_size");
    c.num_layers = integer("num_hidden_layers");
    c.num_heads = integer("num_attention_heads");
    c.num_kv_heads = integer("num_key_value_heads", c.num_heads);
    c.ffn_dim = integer("intermediate_size");
    c.validate();
    check_config(file, config, c);
    return c;
  }
  const std::map<std::string, std::string> meta = read_safetensors_metadata(path);
  const auto producer = meta.find("producer");
  if (producer == meta.end() || producer->second != "tinyllama") {
    throw UsageError(path +
                     ": records no model config; give the Hugging Face model directory "
                     "(with its config.json) instead");
  }
  auto field = [&](const char* key) {
    const auto it = meta.find(key);
    try {
      if (it != meta.end()) return std::stoi(it->second);
    } catch (const std::exception&) {
    }
    throw UsageError(path + ": metadata " + key + " is missing or not an integer");
  };
  c.vocab_size = field("vocab_size");
  c.hidden_dim = field("hidden_dim");
  c.num_layers = field("num_layers");
  c.num_heads = field("num_heads");
  c.num_kv_heads = field("num_kv_heads");
  c.ffn_dim = field("ffn_dim");
  c.validate();
  return c;
}

std::vector<double> load_hf_directory(const std::string& dir, const ParamLayout& layout) {
  const fs::path d(dir);
  std::error_code ec;
  if (!fs::is_regular_file(d / kConfig, ec)) {
    throw UsageError(dir + ": no " + kConfig + " in it (a Hugging Face model directory has one)");
  }
  const json config = read_json(d / kConfig);
  check_config(d / kConfig, config, layout.config());
  RopeLayout rope = RopeLayout::RotateHalf;
  const NamedTensors tensors = read_weights(d, rope);
  // An untied head is loadable only when it equals the embedding (checked
  // by from_hf_tensors); a missing one would be a random head in transformers.
  const json tie = ConfigCheck(dir, config).get("tie_word_embeddings", false);
  const bool has_head = std::any_of(tensors.begin(), tensors.end(),
                                    [](const auto& t) { return t.first == "lm_head.weight"; });
  if (tie != true && !has_head) {
    throw UsageError(dir + ": " + kConfig +
                     " has tie_word_embeddings false but there is no lm_head.weight; tinyllama "
                     "ties the LM head to the embedding");
  }
  return from_hf_tensors(layout, tensors, dir, rope);
}

}  // namespace tinyllama
