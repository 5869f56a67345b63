#include "io/hf_weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>

#include "core/errors.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 37;
  c.hidden_dim = 16;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;  // head_dim 4: q 16 rows, k 8, v 8
  c.ffn_dim = 24;
  return c;
}

// Random non-zero values in every slot and zeros in the alignment padding,
// which is what from_hf_tensors must reproduce.
std::vector<double> random_params(const ParamLayout& layout, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mag(0.25, 2.0);
  std::vector<double> flat(static_cast<std::size_t>(layout.total()), 0.0);
  for (const ParamSlot& s : layout.slots()) {
    for (std::int64_t i = 0; i < s.numel(); ++i)
      flat[s.offset + i] = (rng() & 1 ? 1 : -1) * mag(rng);
  }
  return flat;
}

const TensorData& find(const NamedTensors& ts, const std::string& name) {
  for (const auto& [n, t] : ts) {
    if (n == name) return t;
  }
  throw std::runtime_error("no tensor " + name);
}

double f64_at(const TensorData& t, std::int64_t index) {
  double v;
  std::memcpy(&v, t.bytes.data() + 8 * index, 8);
  return v;
}

std::vector<double> rounded(const std::vector<double>& v, double (*round)(double)) {
  std::vector<double> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = round(v[i]);
  return out;
}

double via_f32(double x) {
  return static_cast<float>(x);
}
double via_bf16(double x) {
  return bf16_bits_to_double(round_to_bf16_bits(x));
}
double via_f16(double x) {
  return f16_bits_to_double(round_to_f16_bits(x));
}

// Runs `f`, expects a UsageError, and returns its message.
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

TEST(HfWeights, NamesAndShapesFollowHuggingFaceLlama) {
  const ParamLayout layout(small_config());
  const NamedTensors ts = to_hf_tensors(layout, random_params(layout, 1), DType::F32);
  ASSERT_EQ(ts.size(), 1u + 9u * 2u + 1u);
  using Shape = std::vector<std::int64_t>;
  EXPECT_EQ(find(ts, "model.embed_tokens.weight").shape, (Shape{37, 16}));
  EXPECT_EQ(find(ts, "model.layers.1.input_layernorm.weight").shape, (Shape{16}));
  EXPECT_EQ(find(ts, "model.layers.1.self_attn.q_proj.weight").shape, (Shape{16, 16}));
  EXPECT_EQ(find(ts, "model.layers.1.self_attn.k_proj.weight").shape, (Shape{8, 16}));
  EXPECT_EQ(find(ts, "model.layers.1.self_attn.v_proj.weight").shape, (Shape{8, 16}));
  EXPECT_EQ(find(ts, "model.layers.1.self_attn.o_proj.weight").shape, (Shape{16, 16}));
  EXPECT_EQ(find(ts, "model.layers.1.post_attention_layernorm.weight").shape, (Shape{16}));
  EXPECT_EQ(find(ts, "model.layers.1.mlp.gate_proj.weight").shape, (Shape{24, 16}));
  EXPECT_EQ(find(ts, "model.layers.1.mlp.up_proj.weight").shape, (Shape{24, 16}));
  EXPECT_EQ(find(ts, "model.layers.1.mlp.down_proj.weight").shape, (Shape{16, 24}));
  EXPECT_EQ(find(ts, "model.norm.weight").shape, (Shape{16}));
  for (const auto& [name, t] : ts) {
    EXPECT_EQ(t.dtype, "F32") << name;
    EXPECT_NE(name, "lm_head.weight");
  }
}

TEST(HfWeights, FusedRowsLandInTheirHfTensors) {
  const ModelConfig c = small_config();
  const ParamLayout layout(c);
  const std::vector<double> flat = random_params(layout, 2);
  const NamedTensors ts = to_hf_tensors(layout, flat, DType::F64);
  const std::int64_t d = c.hidden_dim;
  for (int l = 0; l < c.num_layers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const std::int64_t qkv = layout.layer(l, &LayerSlots::wqkv).offset;
    const std::int64_t gu = layout.layer(l, &LayerSlots::wgu).offset;
    // Element [r, c] of each HF matrix against row (first_row + r) of the fused slot.
    auto at = [&](const char* name, std::int64_t r, std::int64_t col, std::int64_t cols) {
      return f64_at(find(ts, p + name), r * cols + col);
    };
    // q and k rows rotate-half inside each head of 4 (io/hf_rope.h): HF row
    // j holds interleaved row 0, 2, 1, 3 for j = 0, 1, 2, 3.
    EXPECT_EQ(at("self_attn.q_proj.weight", 0, 0, d), flat[qkv]);
    EXPECT_EQ(at("self_attn.q_proj.weight", 1, 4, d), flat[qkv + 2 * d + 4]);
    EXPECT_EQ(at("self_attn.q_proj.weight", 2, 4, d), flat[qkv + 1 * d + 4]);
    EXPECT_EQ(at("self_attn.q_proj.weight", 14, 3, d), flat[qkv + 13 * d + 3]);
    EXPECT_EQ(at("self_attn.q_proj.weight", 15, 3, d), flat[qkv + 15 * d + 3]);
    EXPECT_EQ(at("self_attn.k_proj.weight", 0, 0, d), flat[qkv + 16 * d]);
    EXPECT_EQ(at("self_attn.k_proj.weight", 5, 2, d), flat[qkv + (16 + 6) * d + 2]);
    EXPECT_EQ(at("self_attn.k_proj.weight", 6, 2, d), flat[qkv + (16 + 5) * d + 2]);
    EXPECT_EQ(at("self_attn.k_proj.weight", 7, 5, d), flat[qkv + (16 + 7) * d + 5]);
    EXPECT_EQ(at("self_attn.v_proj.weight", 0, 1, d), flat[qkv + 24 * d + 1]);
    EXPECT_EQ(at("self_attn.v_proj.weight", 7, 15, d), flat[qkv + 31 * d + 15]);
    EXPECT_EQ(at("mlp.gate_proj.weight", 23, 2, d), flat[gu + 23 * d + 2]);
    EXPECT_EQ(at("mlp.up_proj.weight", 0, 0, d), flat[gu + 24 * d]);
    EXPECT_EQ(at("mlp.up_proj.weight", 23, 15, d), flat[gu + 47 * d + 15]);
    EXPECT_EQ(at("self_attn.o_proj.weight", 3, 9, d),
              flat[layout.layer(l, &LayerSlots::wo).offset + 3 * d + 9]);
    EXPECT_EQ(at("mlp.down_proj.weight", 5, 20, 24),
              flat[layout.layer(l, &LayerSlots::wdown).offset + 5 * 24 + 20]);
    EXPECT_EQ(at("input_layernorm.weight", 0, 7, d),
              flat[layout.layer(l, &LayerSlots::attn_norm).offset + 7]);
    EXPECT_EQ(at("post_attention_layernorm.weight", 0, 9, d),
              flat[layout.layer(l, &LayerSlots::ffn_norm).offset + 9]);
  }
  EXPECT_EQ(f64_at(find(ts, "model.embed_tokens.weight"), 36 * d + 15),
            flat[layout.embedding().offset + 36 * d + 15]);
  EXPECT_EQ(f64_at(find(ts, "model.norm.weight"), 11), flat[layout.final_norm().offset + 11]);
}

TEST(HfWeights, RoundTripsInEveryDtypeWithZeroPadding) {
  const ParamLayout layout(small_config());
  const std::vector<double> flat = random_params(layout, 3);
  EXPECT_EQ(from_hf_tensors(layout, to_hf_tensors(layout, flat, DType::F64), "mem"), flat);
  EXPECT_EQ(from_hf_tensors(layout, to_hf_tensors(layout, flat, DType::F32), "mem"),
            rounded(flat, via_f32));
  EXPECT_EQ(from_hf_tensors(layout, to_hf_tensors(layout, flat, DType::BF16), "mem"),
            rounded(flat, via_bf16));
  EXPECT_EQ(from_hf_tensors(layout, to_hf_tensors(layout, flat, DType::F16), "mem"),
            rounded(flat, via_f16));
}

TEST(HfWeights, Bf16RoundsToNearestEven) {
  EXPECT_EQ(round_to_bf16_bits(1.0), 0x3F80);
  EXPECT_EQ(round_to_bf16_bits(-2.0), 0xC000);
  EXPECT_EQ(round_to_bf16_bits(-0.0), 0x8000);
  EXPECT_EQ(round_to_bf16_bits(0.1), 0x3DCD);
  EXPECT_EQ(round_to_bf16_bits(3.140625), 0x4049);
  EXPECT_EQ(round_to_bf16_bits(1.0 + std::ldexp(1, -8)), 0x3F80);      // tie -> even (down)
  EXPECT_EQ(round_to_bf16_bits(1.0 + 3 * std::ldexp(1, -8)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(round_to_bf16_bits(1.0 + std::ldexp(1, -9)), 0x3F80);      // below half
  // Just above a tie; rounding through float first would land on the tie and go down.
  EXPECT_EQ(round_to_bf16_bits(1.0 + std::ldexp(1, -8) + std::ldexp(1, -30)), 0x3F81);
  EXPECT_EQ(round_to_bf16_bits(std::ldexp(1, -133)), 0x0001);        // smallest subnormal
  EXPECT_EQ(round_to_bf16_bits(std::ldexp(1, -134)), 0x0000);        // tie with zero -> even
  EXPECT_EQ(round_to_bf16_bits(1.5 * std::ldexp(1, -134)), 0x0001);  // above the tie
  EXPECT_EQ(round_to_bf16_bits(std::ldexp(127, -133)), 0x007F);      // largest subnormal
  EXPECT_EQ(round_to_bf16_bits(std::ldexp(1, -126)), 0x0080);        // smallest normal
  EXPECT_EQ(round_to_bf16_bits(3.38953139e38), 0x7F7F);              // max finite
  EXPECT_EQ(round_to_bf16_bits(3.4e38), 0x7F80);                     // overflows to inf
  EXPECT_EQ(round_to_bf16_bits(-std::numeric_limits<double>::infinity()), 0xFF80);
  const std::uint16_t nan = round_to_bf16_bits(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  EXPECT_EQ(round_to_bf16_bits(1e-300), 0x0000);
}

TEST(HfWeights, Bf16AndF16Decode) {
  EXPECT_EQ(bf16_bits_to_double(0x3F80), 1.0);
  EXPECT_EQ(bf16_bits_to_double(0x4049), 3.140625);
  EXPECT_EQ(bf16_bits_to_double(0xC000), -2.0);
  EXPECT_EQ(bf16_bits_to_double(0x0001), std::ldexp(1, -133));
  EXPECT_TRUE(std::isinf(bf16_bits_to_double(0x7F80)));
  EXPECT_TRUE(std::isnan(bf16_bits_to_double(0x7FC0)));
  EXPECT_EQ(f16_bits_to_double(0x3C00), 1.0);
  EXPECT_EQ(f16_bits_to_double(0x7BFF), 65504.0);
  EXPECT_EQ(f16_bits_to_double(0x0001), std::ldexp(1, -24));
  EXPECT_EQ(f16_bits_to_double(0x8400), -std::ldexp(1, -14));
}

TEST(HfWeights, F16RoundsToNearestEven) {
  EXPECT_EQ(round_to_f16_bits(1.0), 0x3C00);
  EXPECT_EQ(round_to_f16_bits(0.1), 0x2E66);
  EXPECT_EQ(round_to_f16_bits(1.0 / 3.0), 0x3555);
  EXPECT_EQ(round_to_f16_bits(65504.0), 0x7BFF);
  EXPECT_EQ(round_to_f16_bits(65519.0), 0x7BFF);  // below the tie with 65536
  EXPECT_EQ(round_to_f16_bits(65520.0), 0x7C00);  // tie, max finite is odd -> inf
  EXPECT_EQ(round_to_f16_bits(std::ldexp(1, -24)), 0x0001);
  EXPECT_EQ(round_to_f16_bits(std::ldexp(1, -25)), 0x0000);
  EXPECT_EQ(round_to_f16_bits(std::ldexp(1023, -24) + std::ldexp(1, -25)),
            0x0400);                                               // carries into normal
  EXPECT_EQ(round_to_f16_bits(1.0 + std::ldexp(1, -11)), 0x3C00);  // tie -> even
}

TEST(HfWeights, AcceptsLmHeadEqualToEmbedding) {
  const ParamLayout layout(small_config());
  const std::vector<double> flat = random_params(layout, 4);
  NamedTensors ts = to_hf_tensors(layout, flat, DType::F32);
  ts.emplace_back("lm_head.weight", find(ts, "model.embed_tokens.weight"));
  EXPECT_EQ(from_hf_tensors(layout, ts, "tied.safetensors"), rounded(flat, via_f32));
}

TEST(HfWeights, RejectsLmHeadThatDiffers) {
  const ParamLayout layout(small_config());
  NamedTensors ts = to_hf_tensors(layout, random_params(layout, 5), DType::F32);
  TensorData head = find(ts, "model.embed_tokens.weight");
  head.bytes[100] ^= 1;
  ts.emplace_back("lm_head.weight", head);
  const std::string msg = usage_error([&] { from_hf_tensors(layout, ts, "untied.safetensors"); });
  EXPECT_EQ(msg.rfind("untied.safetensors: lm_head.weight differs", 0), 0u) << msg;
}

TEST(HfWeights, RejectsMissingTensor) {
  const ParamLayout layout(small_config());
  NamedTensors ts = to_hf_tensors(layout, random_params(layout, 6), DType::F32);
  std::erase_if(ts, [](const auto& p) { return p.first == "model.layers.1.mlp.up_proj.weight"; });
  EXPECT_EQ(usage_error([&] { from_hf_tensors(layout, ts, "w.st"); }),
            "w.st: missing tensor model.layers.1.mlp.up_proj.weight (check --num-layers)");
}

TEST(HfWeights, RejectsUnexpectedTensor) {
  const ParamLayout layout(small_config());
  NamedTensors ts = to_hf_tensors(layout, random_params(layout, 7), DType::F32);
  ts.emplace_back("model.layers.2.input_layernorm.weight", find(ts, "model.norm.weight"));
  EXPECT_EQ(usage_error([&] { from_hf_tensors(layout, ts, "w.st"); }),
            "w.st: unexpected tensor model.layers.2.input_layernorm.weight (check --num-layers)");
  ts.back().first = "model.rotary_emb.inv_freq";
  EXPECT_EQ(usage_error([&] { from_hf_tensors(layout, ts, "w.st"); }),
            "w.st: unexpected tensor model.rotary_emb.inv_freq");
}

TEST(HfWeights, RejectsShapeMismatchNamingTheFlags) {
  ModelConfig four_kv = small_config();
  four_kv.num_kv_heads = 4;  // k_proj [16, 16]
  const ParamLayout other(four_kv);
  const NamedTensors ts = to_hf_tensors(other, random_params(other, 8), DType::F32);
  const ParamLayout layout(small_config());
  EXPECT_EQ(usage_error([&] { from_hf_tensors(layout, ts, "w.st"); }),
            "w.st: model.layers.0.self_attn.k_proj.weight has shape [16, 16] but the config needs "
            "[8, 16] (check --hidden-dim/--num-heads/--num-kv-heads)");
}

TEST(HfWeights, RejectsTwoDimensionalNormWeight) {
  const ParamLayout layout(small_config());
  NamedTensors ts = to_hf_tensors(layout, random_params(layout, 9), DType::F32);
  for (auto& [name, t] : ts) {
    if (name == "model.norm.weight") t.shape = {1, 16};
  }
  EXPECT_EQ(
      usage_error([&] { from_hf_tensors(layout, ts, "w.st"); }),
      "w.st: model.norm.weight has shape [1, 16] but the config needs [16] (check --hidden-dim)");
}

TEST(HfWeights, RejectsUnsupportedDtypeAndDuplicates) {
  const ParamLayout layout(small_config());
  NamedTensors ts = to_hf_tensors(layout, random_params(layout, 10), DType::F32);
  for (auto& [name, t] : ts) {
    if (name == "model.norm.weight") t.dtype = "I32";  // same byte size as F32
  }
  const std::string msg = usage_error([&] { from_hf_tensors(layout, ts, "w.st"); });
  EXPECT_NE(msg.find("model.norm.weight has dtype I32"), std::string::npos) << msg;

  NamedTensors dup = to_hf_tensors(layout, random_params(layout, 11), DType::F32);
  dup.push_back(dup.front());
  EXPECT_NE(usage_error([&] { from_hf_tensors(layout, dup, "w.st"); }).find("appears twice"),
            std::string::npos);
}

class HfWeightsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tinyllama_hf_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(HfWeightsFileTest, SaveLoadRoundTripWithMetadata) {
  const ParamLayout layout(small_config());
  const std::vector<double> flat = random_params(layout, 12);
  const std::string path = file("w.safetensors");
  save_hf_weights(path, layout, flat);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  EXPECT_EQ(load_hf_weights(path, layout), rounded(flat, via_f32));

  const std::map<std::string, std::string> meta = read_safetensors_metadata(path);
  EXPECT_EQ(meta.at("format"), "pt");
  EXPECT_EQ(meta.at("producer"), "tinyllama");
  EXPECT_EQ(meta.at("rope_layout"), "rotate_half");
  EXPECT_EQ(meta.at("vocab_size"), "37");
  EXPECT_EQ(meta.at("hidden_dim"), "16");
  EXPECT_EQ(meta.at("num_layers"), "2");
  EXPECT_EQ(meta.at("num_heads"), "4");
  EXPECT_EQ(meta.at("num_kv_heads"), "2");
  EXPECT_EQ(meta.at("ffn_dim"), "24");
  for (const auto& [name, t] : read_safetensors(path)) EXPECT_EQ(t.dtype, "F32") << name;
}

TEST_F(HfWeightsFileTest, RejectsSavedConfigThatShapesCannotTellApart) {
  ModelConfig two_heads = small_config();
  two_heads.num_heads = 2;  // head_dim 8; q 16 rows and k/v 8 rows, exactly as with 4/2
  two_heads.num_kv_heads = 1;
  const ParamLayout other(two_heads);
  const std::string path = file("w.safetensors");
  save_hf_weights(path, other, random_params(other, 13));
  EXPECT_EQ(usage_error([&] { load_hf_weights(path, ParamLayout(small_config())); }),
            path + ": saved with --num-heads 2 but the config has --num-heads 4");
}

TEST_F(HfWeightsFileTest, MissingFileIsUsageErrorCorruptFileIsRuntimeFailure) {
  const ParamLayout layout(small_config());
  const std::string missing = file("missing.safetensors");
  EXPECT_EQ(usage_error([&] { load_hf_weights(missing, layout); }),
            missing + ": no such file or directory");

  const std::string corrupt = file("corrupt.safetensors");
  save_hf_weights(corrupt, layout, random_params(layout, 14));
  fs::resize_file(corrupt, fs::file_size(corrupt) - 4);
  try {
    load_hf_weights(corrupt, layout);
    FAIL() << "expected RuntimeFailure";
  } catch (const RuntimeFailure& e) {
    EXPECT_EQ(std::string(e.what()).rfind(corrupt + ": ", 0), 0u) << e.what();
  }
}

// Files tinyllama wrote before rope_layout was recorded hold interleaved q/k
// rows; they still load to the same weights. Any other producer's Hugging
// Face names mean rotate-half.
TEST_F(HfWeightsFileTest, ReadsOlderInterleavedFilesByTheirMetadata) {
  const ModelConfig c = small_config();
  const ParamLayout layout(c);
  const std::vector<double> flat = random_params(layout, 15);
  NamedTensors ts = to_hf_tensors(layout, flat, DType::F64);
  for (auto& [name, t] : ts) {
    if (name.find("q_proj") == std::string::npos && name.find("k_proj") == std::string::npos) {
      continue;
    }
    std::vector<double> v(static_cast<std::size_t>(t.numel()));
    std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
    reorder_rope_rows(v.data(), t.shape[0], t.shape[1], c.head_dim(), RopeLayout::RotateHalf,
                      RopeLayout::Interleaved);
    std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  }
  const std::string old_file = file("old.safetensors");
  write_safetensors(old_file, ts, {{"format", "pt"}, {"producer", "tinyllama"}});
  EXPECT_EQ(load_hf_weights(old_file, layout), flat);
  // The same bytes from another producer are read as rotate-half: different weights.
  const std::string other = file("other.safetensors");
  write_safetensors(other, ts, {{"format", "pt"}});
  EXPECT_NE(load_hf_weights(other, layout), flat);
  const std::string unknown = file("unknown.safetensors");
  write_safetensors(unknown, ts, {{"rope_layout", "sideways"}});
  EXPECT_EQ(usage_error([&] { load_hf_weights(unknown, layout); }),
            unknown + ": unknown rope_layout 'sideways' (expected rotate_half or interleaved)");
}

}  // namespace
}  // namespace tinyllama
