#pragma once
// Tinyllama's flat parameter vector <-> Hugging Face LLaMA tensor names, so a
// checkpoint loads into transformers' LlamaForCausalLM (with tied embeddings)
// and into PyTorch reference scripts, and their weights load here.
//
// Tinyllama stores fused buffers (DESIGN §1); HF stores them split:
//   layers.N.wqkv rows [q | k | v] -> model.layers.N.self_attn.{q,k,v}_proj.weight
//   layers.N.wgu rows [gate | up]  -> model.layers.N.mlp.{gate,up}_proj.weight
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/narrow_float.h"  // the element conversions it uses
#include "io/safetensors.h"
#include "model/param_layout.h"

namespace tinyllama {

// The HF tensors of `flat` (indexed by layout offsets) in `dtype` (F32, F64,
// BF16 or F16, rounded to nearest even). No lm_head.weight: the head is tied.
NamedTensors to_hf_tensors(const ParamLayout& layout, const std::vector<double>& flat, DType dtype);

// The inverse; accepts F32/F64/BF16/F16 tensors and an lm_head.weight only
// if it equals the embedding. Padding between slots stays zero. Throws
// UsageError naming `source_name` and the offending tensor.
std::vector<double> from_hf_tensors(const ParamLayout& layout, const NamedTensors& tensors,
                                    const std::string& source_name);

// F32 safetensors with metadata {"format": "pt", "producer": "tinyllama"} and
// the model config (vocab_size, hidden_dim, ...), written atomically.
void save_hf_weights(const std::string& path, const ParamLayout& layout,
                     const std::vector<double>& flat);

// Reads a file written by save_hf_weights or by HF tools. A config recorded by
// tinyllama that disagrees with `layout` is a UsageError even where shapes
// agree (e.g. --num-heads 4 vs 8 at the same --hidden-dim).
std::vector<double> load_hf_weights(const std::string& path, const ParamLayout& layout);

// The safetensors name of a dtype: "F32", "F64", "BF16", "F16".
const char* hf_dtype(DType t);

}  // namespace tinyllama
