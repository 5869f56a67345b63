#pragma once
// A Hugging Face LLaMA model directory: config.json and model.safetensors
// (or shards listed by model.safetensors.index.json), what
// transformers.LlamaForCausalLM.from_pretrained(DIR) loads as is and what
// `tinyllama train --export-hf DIR` writes.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/param_layout.h"

namespace tinyllama {

struct HfTokenizer;  // io/hf_tokenizer.h

// The LlamaConfig of this model: its shapes, DESIGN §1's math (SiLU,
// rms_norm_eps, rope_theta, no biases, the head tied to the embedding),
// the unpadded vocabulary, float32, and max_position_embeddings = the
// sequence length it was trained at.
nlohmann::json hf_config_json(const ModelConfig& c, int max_positions);

// Writes DIR/config.json and DIR/model.safetensors (float32, q/k rows
// rotate-half, no lm_head.weight), and with a tokenizer its files and
// special ids (io/hf_tokenizer.h), each complete or absent (a temporary
// renamed into place); DIR and missing parents are created. Throws
// RuntimeFailure naming the file on I/O errors.
void export_hf_directory(const std::string& dir, const ParamLayout& layout,
                         const std::vector<double>& flat, int max_positions,
                         const HfTokenizer* tokenizer = nullptr);

// Reads a directory written by export_hf_directory or by transformers'
// save_pretrained (safetensors; tied, or with an lm_head.weight equal to
// the embedding). config.json is checked against `layout.config()` key by
// key: a model this engine does not compute the same way (another
// architecture, biases, rope_scaling, another eps or theta or activation)
// or another shape is a UsageError naming the key, both values and the
// flag to change.
std::vector<double> load_hf_directory(const std::string& dir, const ParamLayout& layout);

// The model a weights source describes, for commands that take the model
// from it (generate): a directory's config.json (its keys checked as
// load_hf_directory does), or the config tinyllama records in a
// safetensors file's metadata. A file without one is a UsageError asking
// for the directory.
ModelConfig read_model_config(const std::string& path);

}  // namespace tinyllama
