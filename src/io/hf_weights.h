#pragma once
// Tinyllama's flat parameter vector <-> Hugging Face LLaMA tensor names, so a
// checkpoint loads into transformers' LlamaForCausalLM (with tied embeddings)
// and into PyTorch reference scripts, and their weights load here.
//
// Tinyllama stores fused buffers (DESIGN §1); HF stores them split:
//   layers.N.wqkv rows [q | k | v] -> model.layers.N.self_attn.{q,k,v}_proj.weight
//   layers.N.wgu rows [gate | up]  -> model.layers.N.mlp.{gate,up}_proj.weight
// Every tensor with these names is written in Hugging Face's layout: the q
// and k rows reordered from tinyllama's interleaved RoPE pairs to
// rotate-half (io/hf_rope.h), so transformers computes the same model. Files
// record it as metadata rope_layout = rotate_half; files tinyllama saved
// before that (producer tinyllama, no rope_layout) are read as interleaved.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/narrow_float.h"  // the element conversions it uses
#include "io/hf_rope.h"
#include "io/safetensors.h"
#include "model/param_layout.h"

namespace tinyllama {

// The HF tensors of `flat` (indexed by layout offsets) in `dtype` (F32, F64,
// BF16 or F16, rounded to nearest even), q/k rows rotate-half. No
// lm_head.weight: the head is tied.
NamedTensors to_hf_tensors(const ParamLayout& layout, const std::vector<double>& flat, DType dtype);

// The inverse; accepts F32/F64/BF16/F16 tensors and an lm_head.weight only
// if it equals the embedding; q/k rows in `source_layout` (a permutation,
// so exact). Padding between slots stays zero. Throws UsageError naming
// `source_name` and the offending tensor.
std::vector<double> from_hf_tensors(const ParamLayout& layout, const NamedTensors& tensors,
                                    const std::string& source_name,
                                    RopeLayout source_layout = RopeLayout::RotateHalf);

// F32 safetensors with metadata {"format": "pt", "producer": "tinyllama",
// "rope_layout": "rotate_half"} and the model config (vocab_size,
// hidden_dim, ...), written atomically.
void save_hf_weights(const std::string& path, const ParamLayout& layout,
                     const std::vector<double>& flat);

// Reads a file written by save_hf_weights or by HF tools, or a Hugging Face
// model directory (io/hf_directory.h). A config recorded by tinyllama that
// disagrees with `layout` is a UsageError even where shapes agree (e.g.
// --num-heads 4 vs 8 at the same --hidden-dim).
std::vector<double> load_hf_weights(const std::string& path, const ParamLayout& layout);

// The q/k row layout of a file from its safetensors metadata (see above);
// an unknown rope_layout value is a UsageError naming `path`.
RopeLayout rope_layout_of(const std::string& path,
                          const std::map<std::string, std::string>& metadata);
inline constexpr const char* kRopeLayoutKey = "rope_layout";
inline constexpr const char* kRotateHalf = "rotate_half";
inline constexpr const char* kInterleaved = "interleaved";

// The safetensors name of a dtype: "F32", "F64", "BF16", "F16".
const char* hf_dtype(DType t);

}  // namespace tinyllama
