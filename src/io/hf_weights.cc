#include "io/hf_weights.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/errors.h"
#include "io/hf_directory.h"

namespace tinyllama {
namespace {

// One HF tensor: a block of whole rows of one tinyllama slot.
struct HfTensor {
  std::string name;
  std::int64_t offset = 0;  // first element in the flat vector
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  bool one_d = false;      // norm weights are [D] in HF, not [1, D]
  const char* flags = "";  // which flags decide the shape, for mismatch hints
  bool rope_rows = false;  // q_proj, k_proj: rows in a RoPE layout (io/hf_rope.h)

  std::int64_t numel() const { return rows * cols; }
  std::vector<std::int64_t> shape() const {
    return one_d ? std::vector<std::int64_t>{cols} : std::vector<std::int64_t>{rows, cols};
  }
};

constexpr const char* kLmHead = "lm_head.weight";
constexpr const char* kAttnFlags = "--hidden-dim/--num-heads/--num-kv-heads";
constexpr const char* kFfnFlags = "--hidden-dim/--ffn-dim";

// The single place that knows the name mapping; both directions use it.
std::vector<HfTensor> hf_tensors(const ParamLayout& layout) {
  const ModelConfig& c = layout.config();
  std::vector<HfTensor> out;
  auto add = [&out](std::string name, const ParamSlot& s, std::int64_t first_row, std::int64_t rows,
                    const char* flags) {
    out.push_back({std::move(name), s.offset + first_row * s.cols, rows, s.cols, s.is_norm, flags});
  };
  add("model.embed_tokens.weight", layout.embedding(), 0, c.vocab_size,
      "--vocab-size/--hidden-dim");
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const ParamSlot& qkv = layout.layer(l, &LayerSlots::wqkv);
    const ParamSlot& gu = layout.layer(l, &LayerSlots::wgu);
    add(p + "input_layernorm.weight", layout.layer(l, &LayerSlots::attn_norm), 0, 1,
        "--hidden-dim");
    add(p + "self_attn.q_proj.weight", qkv, 0, c.q_dim(), kAttnFlags);
    add(p + "self_attn.k_proj.weight", qkv, c.q_dim(), c.kv_dim(), kAttnFlags);
    out[out.size() - 2].rope_rows = out.back().rope_rows = true;
    add(p + "self_attn.v_proj.weight", qkv, c.q_dim() + c.kv_dim(), c.kv_dim(), kAttnFlags);
    add(p + "self_attn.o_proj.weight", layout.layer(l, &LayerSlots::wo), 0, c.hidden_dim,
        kAttnFlags);
    add(p + "post_attention_layernorm.weight", layout.layer(l, &LayerSlots::ffn_norm), 0, 1,
        "--hidden-dim");
    add(p + "mlp.gate_proj.weight", gu, 0, c.ffn_dim, kFfnFlags);
    add(p + "mlp.up_proj.weight", gu, c.ffn_dim, c.ffn_dim, kFfnFlags);
    add(p + "mlp.down_proj.weight", layout.layer(l, &LayerSlots::wdown), 0, c.hidden_dim,
        kFfnFlags);
  }
  add("model.norm.weight", layout.final_norm(), 0, 1, "--hidden-dim");
  return out;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void encode(const double* src, std::int64_t n, DType t, std::uint8_t* dst) {
  for (std::int64_t i = 0; i < n; ++i) {
    switch (t) {
      case DType::F32: {
        const float f = static_cast<float>(src[i]);  // the FPU rounds to nearest even
        std::memcpy(dst + 4 * i, &f, 4);
        break;
      }
      case DType::F64:
        std::memcpy(dst + 8 * i, &src[i], 8);
        break;
      case DType::BF16:
      case DType::F16: {
        const std::uint16_t h =
            t == DType::BF16 ? round_to_bf16_bits(src[i]) : round_to_f16_bits(src[i]);
        std::memcpy(dst + 2 * i, &h, 2);
        break;
      }
    }
  }
}

// Decodes a whole tensor; throws for dtypes a weight cannot have.
std::vector<double> decode(const std::string& source, const std::string& name,
                           const TensorData& t) {
  const std::int64_t n = t.numel();
  const std::size_t elem = safetensors_dtype_size(t.dtype);
  const bool supported =
      t.dtype == "F32" || t.dtype == "F64" || t.dtype == "BF16" || t.dtype == "F16";
  if (!supported) {
    throw UsageError(source + ": " + name + " has dtype " + t.dtype +
                     "; only F32, F64, BF16 and F16 weights can be loaded");
  }
  if (static_cast<std::size_t>(n) * elem != t.bytes.size()) {
    throw UsageError(source + ": " + name + " holds " + std::to_string(t.bytes.size()) +
                     " bytes, not the " + std::to_string(n * elem) + " its shape needs");
  }
  std::vector<double> out(static_cast<std::size_t>(n));
  const std::uint8_t* p = t.bytes.data();
  // One loop per dtype: a billion-parameter load should not compare strings per element.
  if (t.dtype == "F32") {
    for (std::int64_t i = 0; i < n; ++i) {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      out[i] = f;
    }
  } else if (t.dtype == "F64") {
    if (n > 0) std::memcpy(out.data(), p, t.bytes.size());
  } else {
    double (*widen)(std::uint16_t) = t.dtype == "BF16" ? bf16_bits_to_double : f16_bits_to_double;
    for (std::int64_t i = 0; i < n; ++i) {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      out[i] = widen(h);
    }
  }
  return out;
}

// A hint for a tensor name that would fit a model with more layers.
std::string layer_hint(const std::string& name) {
  return name.rfind("model.layers.", 0) == 0 ? " (check --num-layers)" : "";
}

// A tied checkpoint may still carry the head explicitly (transformers does
// when saving some models); accept it only if it really is the embedding.
void check_lm_head(const std::string& source, const TensorData& head, const TensorData& embedding) {
  const std::string untied =
      "tinyllama ties the LM head to the embedding and cannot load an untied one";
  if (head.shape != embedding.shape) {
    throw UsageError(source + ": " + kLmHead + " has shape " + shape_text(head.shape) +
                     " but model.embed_tokens.weight has " + shape_text(embedding.shape) + "; " +
                     untied);
  }
  const std::vector<double> h = decode(source, kLmHead, head);
  const std::vector<double> e = decode(source, "model.embed_tokens.weight", embedding);
  for (std::size_t i = 0; i < h.size(); ++i) {
    if (h[i] != e[i]) {
      throw UsageError(source + ": " + kLmHead +
                       " differs from model.embed_tokens.weight at element " + std::to_string(i) +
                       "; " + untied);
    }
  }
}

// Rejects a file that tinyllama saved with another config, which shapes alone
// can miss: heads and kv heads change head_dim (and RoPE) without changing
// any matrix shape when their ratio is kept.
void check_saved_config(const std::string& path, const ModelConfig& c) {
  const std::map<std::string, std::string> meta = read_safetensors_metadata(path);
  const auto producer = meta.find("producer");
  if (producer == meta.end() || producer->second != "tinyllama") return;
  const std::pair<const char*, int> fields[] = {
      {"vocab_size", c.vocab_size}, {"hidden_dim", c.hidden_dim},     {"num_layers", c.num_layers},
      {"num_heads", c.num_heads},   {"num_kv_heads", c.num_kv_heads}, {"ffn_dim", c.ffn_dim}};
  for (const auto& [key, value] : fields) {
    const auto it = meta.find(key);
    if (it == meta.end() || it->second == std::to_string(value)) continue;
    std::string flag = key;
    for (char& ch : flag) ch = ch == '_' ? '-' : ch;
    throw UsageError(path + ": saved with --" + flag + " " + it->second + " but the config has --" +
                     flag + " " + std::to_string(value));
  }
}

}  // namespace

const char* hf_dtype(DType t) {
  switch (t) {
    case DType::F32:
      return "F32";
    case DType::F64:
      return "F64";
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
  }
  return "?";
}

NamedTensors to_hf_tensors(const ParamLayout& layout, const std::vector<double>& flat,
                           DType dtype) {
  if (static_cast<std::int64_t>(flat.size()) != layout.total()) {
    throw RuntimeFailure("to_hf_tensors: parameter vector has " + std::to_string(flat.size()) +
                         " elements, the layout " + std::to_string(layout.total()));
  }
  NamedTensors out;
  const int head_dim = layout.config().head_dim();
  for (const HfTensor& h : hf_tensors(layout)) {
    TensorData t;
    t.dtype = hf_dtype(dtype);
    t.shape = h.shape();
    t.bytes.resize(static_cast<std::size_t>(h.numel()) * dtype_size(dtype));
    const double* values = flat.data() + h.offset;
    std::vector<double> reordered;
    if (h.rope_rows) {
      reordered.assign(values, values + h.numel());
      reorder_rope_rows(reordered.data(), h.rows, h.cols, head_dim, RopeLayout::Interleaved,
                        RopeLayout::RotateHalf);
      values = reordered.data();
    }
    encode(values, h.numel(), dtype, t.bytes.data());
    out.emplace_back(h.name, std::move(t));
  }
  return out;
}

std::vector<double> from_hf_tensors(const ParamLayout& layout, const NamedTensors& tensors,
                                    const std::string& source_name, RopeLayout source_layout) {
  std::map<std::string, const TensorData*> by_name;
  for (const auto& [name, t] : tensors) {
    if (!by_name.emplace(name, &t).second) {
      throw UsageError(source_name + ": tensor " + name + " appears twice");
    }
  }
  const std::vector<HfTensor> expected = hf_tensors(layout);
  std::map<std::string, const HfTensor*> known;
  for (const HfTensor& h : expected) known[h.name] = &h;
  for (const auto& [name, t] : tensors) {
    if (!known.count(name) && name != kLmHead) {
      throw UsageError(source_name + ": unexpected tensor " + name + layer_hint(name));
    }
  }

  std::vector<double> flat(static_cast<std::size_t>(layout.total()), 0.0);  // padding stays zero
  for (const HfTensor& h : expected) {
    const auto it = by_name.find(h.name);
    if (it == by_name.end()) {
      throw UsageError(source_name + ": missing tensor " + h.name + layer_hint(h.name));
    }
    const TensorData& t = *it->second;
    if (t.shape != h.shape()) {
      throw UsageError(source_name + ": " + h.name + " has shape " + shape_text(t.shape) +
                       " but the config needs " + shape_text(h.shape()) + " (check " + h.flags +
                       ")");
    }
    const std::vector<double> values = decode(source_name, h.name, t);
    // Training from a NaN or an infinity only spreads it: refused up front.
    const auto bad =
        std::find_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); });
    if (bad != values.end()) {
      throw UsageError(source_name + ": " + h.name + " holds a non-finite value (" +
                       (std::isnan(*bad) ? "nan"
                        : *bad > 0       ? "inf"
                                         : "-inf") +
                       ") at element " + std::to_string(bad - values.begin()) +
                       "; refusing to train from it");
    }
    std::copy(values.begin(), values.end(), flat.begin() + h.offset);
  }
  const auto head = by_name.find(kLmHead);
  if (head != by_name.end()) {
    check_lm_head(source_name, *head->second, *by_name.at(expected[0].name));
  }
  for (const HfTensor& h : expected) {
    if (h.rope_rows) {
      reorder_rope_rows(flat.data() + h.offset, h.rows, h.cols, layout.config().head_dim(),
                        source_layout, RopeLayout::Interleaved);
    }
  }
  return flat;
}

void save_hf_weights(const std::string& path, const ParamLayout& layout,
                     const std::vector<double>& flat) {
  const ModelConfig& c = layout.config();
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},  // lets transformers' from_pretrained accept the file
      {"producer", "tinyllama"},
      {kRopeLayoutKey, kRotateHalf},
      {"vocab_size", std::to_string(c.vocab_size)},
      {"hidden_dim", std::to_string(c.hidden_dim)},
      {"num_layers", std::to_string(c.num_layers)},
      {"num_heads", std::to_string(c.num_heads)},
      {"num_kv_heads", std::to_string(c.num_kv_heads)},
      {"ffn_dim", std::to_string(c.ffn_dim)}};
  write_safetensors(path, to_hf_tensors(layout, flat, DType::F32), metadata);
}

RopeLayout rope_layout_of(const std::string& path,
                          const std::map<std::string, std::string>& metadata) {
  const auto producer = metadata.find("producer");
  const auto rope = metadata.find(kRopeLayoutKey);
  if (rope == metadata.end()) {
    // Before rope_layout was recorded, tinyllama saved interleaved rows; every
    // other producer of Hugging Face LLaMA names uses rotate-half.
    const bool ours = producer != metadata.end() && producer->second == "tinyllama";
    return ours ? RopeLayout::Interleaved : RopeLayout::RotateHalf;
  }
  if (rope->second == kRotateHalf) return RopeLayout::RotateHalf;
  if (rope->second == kInterleaved) return RopeLayout::Interleaved;
  throw UsageError(path + ": unknown " + kRopeLayoutKey + " '" + rope->second + "' (expected " +
                   kRotateHalf + " or " + kInterleaved + ")");
}

std::vector<double> load_hf_weights(const std::string& path, const ParamLayout& layout) {
  // A wrong path is a usage error (exit 2); a file that exists but is corrupt
  // is reported by read_safetensors as a runtime failure naming the file.
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw UsageError(path + ": no such file or directory");
  if (std::filesystem::is_directory(path, ec)) return load_hf_directory(path, layout);
  check_saved_config(path, layout.config());
  return from_hf_tensors(layout, read_safetensors(path), path,
                         rope_layout_of(path, read_safetensors_metadata(path)));
}

}  // namespace tinyllama
