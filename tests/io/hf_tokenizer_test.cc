// The tokenizer files of an exported Hugging Face directory
// (io/hf_tokenizer.h): Llama 2's file set and keys, and the record read back.
#include "io/hf_tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/fingerprint.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

HfTokenizer llama_like() {
  HfTokenizer t;
  t.model_bytes = std::string("\x0a\x05model bytes", 13);
  t.fingerprint = fingerprint_of(t.model_bytes);
  t.vocab_size = 8000;
  t.unk_id = 0;
  t.bos_id = 1;
  t.eos_id = 2;
  t.pad_id = -1;
  t.unk_piece = "<unk>";
  t.bos_piece = "<s>";
  t.eos_piece = "</s>";
  return t;
}

json read(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

TEST(HfTokenizer, WritesLlama2sFilesAndSpecialIds) {
  const fs::path dir = fs::temp_directory_path() / ("tl_hftok_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const HfTokenizer t = llama_like();
  write_hf_tokenizer_files(dir.string(), t, 256);
  std::ifstream model(dir / "tokenizer.model", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(model), {}), t.model_bytes);
  const json config = read(dir / "tokenizer_config.json");
  EXPECT_EQ(config["tokenizer_class"], "LlamaTokenizer");
  EXPECT_EQ(config["add_bos_token"], true);
  EXPECT_EQ(config["add_eos_token"], false);
  EXPECT_EQ(config["legacy"], true);
  // Left to its default (true): false would drop the dummy prefix on encode.
  EXPECT_FALSE(config.contains("add_prefix_space"));
  EXPECT_FALSE(fs::exists(dir / "tokenizer.json"));  // transformers converts tokenizer.model
  EXPECT_EQ(config["bos_token"], "<s>");
  EXPECT_TRUE(config["pad_token"].is_null());
  EXPECT_EQ(config["model_max_length"], 256);
  EXPECT_EQ(read(dir / "special_tokens_map.json")["eos_token"], "</s>");

  json model_config = {{"model_type", "llama"}};
  add_tokenizer_to_config(model_config, t);
  EXPECT_EQ(model_config["bos_token_id"], 1);
  EXPECT_EQ(model_config["eos_token_id"], 2);
  EXPECT_TRUE(model_config["pad_token_id"].is_null());
  std::ofstream(dir / "config.json") << model_config.dump();
  const HfTokenizerRecord r = read_hf_tokenizer_record(dir.string());
  EXPECT_TRUE(r.present);
  EXPECT_EQ(r.fingerprint, t.fingerprint);
  EXPECT_EQ(r.vocab_size, 8000);

  // A directory transformers saved: no record, the model file's fingerprint.
  std::ofstream(dir / "config.json") << R"({"model_type": "llama"})";
  EXPECT_EQ(read_hf_tokenizer_record(dir.string()).fingerprint, t.fingerprint);
  std::ofstream(dir / "config.json") << R"({"tinyllama_tokenizer": {"fingerprint": 5}})";
  EXPECT_THROW(read_hf_tokenizer_record(dir.string()), UsageError);
  fs::remove_all(dir);
  EXPECT_FALSE(read_hf_tokenizer_record(dir.string()).present);
}

}  // namespace
}  // namespace tinyllama
