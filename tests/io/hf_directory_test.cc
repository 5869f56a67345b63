// Hugging Face model directories (io/hf_directory.h): what --export-hf
// writes (config.json's keys and values, model.safetensors), reading it
// back, reading what transformers' save_pretrained writes (tied, with an
// equal lm_head, sharded), and every refusal with the key and the flag.
#include "io/hf_directory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/errors.h"
#include "io/hf_weights.h"
#include "io/safetensors.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 37;
  c.hidden_dim = 16;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.ffn_dim = 24;
  return c;
}

std::vector<double> random_f32_params(const ParamLayout& layout, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 0.5);
  std::vector<double> flat(static_cast<std::size_t>(layout.total()), 0.0);
  for (const ParamSlot& s : layout.slots()) {
    for (std::int64_t i = 0; i < s.numel(); ++i) {
      flat[s.offset + i] = static_cast<float>(normal(rng) + (normal(rng) > 0 ? 0.1 : -0.1));
    }
  }
  return flat;
}

template <typename F>
std::string usage_error(F f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected UsageError";
  return "";
}

class HfDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ = fs::temp_directory_path() /
            ("tinyllama_hfdir_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(root_);
    dir_ = (root_ / "nested" / "model").string();
    export_hf_directory(dir_, layout_, flat_, 64);
  }
  void TearDown() override { fs::remove_all(root_); }

  json config() const {
    std::ifstream in(fs::path(dir_) / "config.json");
    return json::parse(in);
  }
  void write_config(const json& j) const {
    std::ofstream(fs::path(dir_) / "config.json") << j.dump(2);
  }
  std::string load_error() const {
    return usage_error([&] { load_hf_weights(dir_, layout_); });
  }

  ModelConfig cfg_ = small_config();
  ParamLayout layout_{cfg_};
  std::vector<double> flat_ = random_f32_params(layout_, 3);
  fs::path root_;
  std::string dir_;
};

TEST_F(HfDirectory, ExportWritesLlamaConfigAndWeights) {
  const json c = config();
  EXPECT_EQ(c["architectures"], json::array({"LlamaForCausalLM"}));
  EXPECT_EQ(c["model_type"], "llama");
  EXPECT_EQ(c["vocab_size"], 37);  // unpadded (padded_vocab() is 128)
  EXPECT_EQ(c["hidden_size"], 16);
  EXPECT_EQ(c["intermediate_size"], 24);
  EXPECT_EQ(c["num_hidden_layers"], 2);
  EXPECT_EQ(c["num_attention_heads"], 4);
  EXPECT_EQ(c["num_key_value_heads"], 2);
  EXPECT_EQ(c["head_dim"], 4);
  EXPECT_EQ(c["hidden_act"], "silu");
  EXPECT_EQ(c["rms_norm_eps"], 1e-6);
  EXPECT_EQ(c["rope_theta"], 10000.0);
  EXPECT_TRUE(c["rope_scaling"].is_null());
  EXPECT_EQ(c["tie_word_embeddings"], true);
  EXPECT_EQ(c["attention_bias"], false);
  EXPECT_EQ(c["mlp_bias"], false);
  EXPECT_EQ(c["torch_dtype"], "float32");
  EXPECT_EQ(c["max_position_embeddings"], 64);
  const std::string weights = (fs::path(dir_) / "model.safetensors").string();
  const auto meta = read_safetensors_metadata(weights);
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(meta.at("rope_layout"), "rotate_half");
  for (const auto& [name, t] : read_safetensors(weights)) {
    EXPECT_EQ(t.dtype, "F32") << name;
    EXPECT_NE(name, "lm_head.weight");
    if (name == "model.embed_tokens.weight") {
      EXPECT_EQ(t.shape[0], 37);
    }
  }
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().extension() == ".tmp", false) << e.path();
  }
}

TEST_F(HfDirectory, ReadsItsExportBackExactly) {
  EXPECT_EQ(load_hf_weights(dir_, layout_), flat_);
  // A second export over the first replaces it.
  const std::vector<double> other = random_f32_params(layout_, 4);
  export_hf_directory(dir_, layout_, other, 64);
  EXPECT_EQ(load_hf_weights(dir_, layout_), other);
}

// What save_pretrained writes: metadata {"format": "pt"} only, the head
// either dropped (tied) or present and equal; config keys it may omit take
// LlamaConfig's defaults.
TEST_F(HfDirectory, ReadsTransformersDirectories) {
  const fs::path weights = fs::path(dir_) / "model.safetensors";
  NamedTensors ts = read_safetensors(weights.string());
  write_safetensors(weights.string(), ts, {{"format", "pt"}});
  json c = config();
  c.erase("head_dim");
  c.erase("num_key_value_heads");  // defaults to the heads: 4, not 2
  write_config(c);
  EXPECT_EQ(load_error(), (fs::path(dir_) / "config.json").string() +
                              ": num_key_value_heads is 4, expected 2; run with --num-kv-heads 4");
  c["num_key_value_heads"] = 2;
  c["tie_word_embeddings"] = false;
  write_config(c);
  EXPECT_EQ(load_error(), dir_ +
                              ": config.json has tie_word_embeddings false but there is no "
                              "lm_head.weight; tinyllama ties the LM head to the embedding");
  for (const auto& [name, t] : NamedTensors(ts)) {
    if (name == "model.embed_tokens.weight") ts.emplace_back("lm_head.weight", t);
  }
  write_safetensors(weights.string(), ts, {{"format", "pt"}});
  EXPECT_EQ(load_hf_weights(dir_, layout_), flat_);
}

TEST_F(HfDirectory, ReadsShardedWeights) {
  const fs::path d(dir_);
  NamedTensors all = read_safetensors((d / "model.safetensors").string());
  fs::remove(d / "model.safetensors");
  NamedTensors a(all.begin(), all.begin() + 5), b(all.begin() + 5, all.end());
  write_safetensors((d / "model-00001-of-00002.safetensors").string(), a, {{"format", "pt"}});
  write_safetensors((d / "model-00002-of-00002.safetensors").string(), b, {{"format", "pt"}});
  json index = {{"metadata", json::object()}, {"weight_map", json::object()}};
  for (const auto& [name, t] : a) index["weight_map"][name] = "model-00001-of-00002.safetensors";
  for (const auto& [name, t] : b) index["weight_map"][name] = "model-00002-of-00002.safetensors";
  std::ofstream(d / "model.safetensors.index.json") << index.dump();
  EXPECT_EQ(load_hf_weights(dir_, layout_), flat_);
  index["weight_map"]["model.norm.weight"] = "../elsewhere.safetensors";
  std::ofstream(d / "model.safetensors.index.json") << index.dump();
  EXPECT_NE(load_error().find("model.norm.weight maps to \"../elsewhere.safetensors\", not a file "
                              "name in the directory"),
            std::string::npos);
}

TEST_F(HfDirectory, RefusesModelsComputedDifferentlyNamingKeyAndFlag) {
  const std::string path = (fs::path(dir_) / "config.json").string();
  struct Case {
    const char* key;
    json value;
    std::string message;
  };
  const Case cases[] = {
      {"vocab_size", 32000, "vocab_size is 32000, expected 37; run with --vocab-size 32000"},
      {"hidden_size", 64, "hidden_size is 64, expected 16; run with --hidden-dim 64"},
      {"num_hidden_layers", 3, "num_hidden_layers is 3, expected 2; run with --num-layers 3"},
      {"intermediate_size", 48, "intermediate_size is 48, expected 24; run with --ffn-dim 48"},
      {"model_type", "mistral",
       "model_type is \"mistral\", expected \"llama\" (tinyllama reads LLaMA models only)"},
      {"hidden_act", "gelu",
       "hidden_act is \"gelu\", expected \"silu\" (tinyllama's MLP is SwiGLU)"},
      {"rms_norm_eps", 1e-5,
       "rms_norm_eps is 1e-05, expected 1e-06, which tinyllama computes with"},
      {"rope_theta", 500000.0,
       "rope_theta is 500000.0, expected 10000.0, which tinyllama computes with"},
      {"rope_scaling",
       {{"type", "linear"}, {"factor", 2.0}},
       "rope_scaling is {\"factor\":2.0,\"type\":\"linear\"}, expected null (tinyllama applies "
       "plain RoPE)"},
      {"attention_bias", true,
       "attention_bias is true, expected false (tinyllama's projections have no bias)"},
      {"head_dim", 8, "head_dim is 8, expected 4 (tinyllama's head_dim is hidden_size / heads)"},
  };
  const json good = config();
  for (const Case& c : cases) {
    json j = good;
    j[c.key] = c.value;
    write_config(j);
    EXPECT_EQ(load_error(), path + ": " + c.message);
  }
  write_config(good);
  EXPECT_EQ(load_hf_weights(dir_, layout_), flat_);
}

TEST_F(HfDirectory, RefusesDirectoriesWithoutTheFiles) {
  const fs::path d(dir_);
  fs::remove(d / "model.safetensors");
  EXPECT_EQ(load_error(), dir_ + ": no model.safetensors or model.safetensors.index.json in it");
  std::ofstream(d / "pytorch_model.bin") << "x";
  EXPECT_NE(load_error().find("holds pytorch_model.bin only"), std::string::npos);
  fs::remove(d / "config.json");
  EXPECT_EQ(load_error(), dir_ + ": no config.json in it (a Hugging Face model directory has one)");
  std::ofstream(d / "config.json") << "{not json";
  EXPECT_NE(load_error().find("config.json: not valid JSON"), std::string::npos);
}

}  // namespace
}  // namespace tinyllama
