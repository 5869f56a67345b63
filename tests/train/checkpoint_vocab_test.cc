// Checkpoints at a vocabulary that is not a multiple of 128 (37, which the
// model pads to 128 rows for the LM-head GEMMs): the file holds the
// embedding's vocab_size rows only, in the parameters and both AdamW
// moments; loading pads them again with zero rows; a run stopped and
// resumed is bit-identical to one never stopped; and a checkpoint of the
// previous format (version 1: one flat tensor per block, padded rows
// included) still resumes, bit-identically too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "core/errors.h"
#include "cpu/cpu_backend.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "model/same_bits.h"
#include "train/checkpoint.h"
#include "train/run_setup.h"
#include "train/trainer.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

constexpr int kVocab = 37;
constexpr int kHidden = 16;

TrainOptions odd_vocab_run(const fs::path& ck, int num_steps) {
  TrainOptions o;
  o.model.vocab_size = kVocab;
  o.model.hidden_dim = kHidden;
  o.model.num_layers = 2;
  o.model.num_heads = 4;
  o.model.num_kv_heads = 2;
  o.model.ffn_dim = 24;
  o.shape = {3, 8};
  o.device_request = DeviceKind::Cpu;
  o.warmup_steps = 1;
  o.num_steps = num_steps;
  o.learning_rate = 3e-3;  // large enough that every step visibly moves the weights
  o.checkpoint_dir = ck.string();
  o.keep_checkpoints = 0;
  resolve_run(o);
  return o;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::map<std::string, TensorData> tensors_of(const std::string& path) {
  std::map<std::string, TensorData> out;
  for (auto& [name, t] : read_safetensors(path)) out.emplace(name, std::move(t));
  return out;
}

std::vector<double> losses(const TrainSummary& s) {
  std::vector<double> out;
  for (const StepRecord& r : s.steps) out.push_back(r.loss);
  return out;
}

// The flat indices of the embedding's padded rows in `model`'s layout.
std::vector<std::size_t> padded_rows(const Model& model) {
  const ParamSlot& e = model.layout().embedding();
  std::vector<std::size_t> out;
  for (std::int64_t i = e.offset + e.numel(); i < e.offset + e.stored_numel(); ++i) {
    out.push_back(static_cast<std::size_t>(i));
  }
  return out;
}

// Rewrites the version-2 checkpoint `from` as the previous format wrote it:
// each block one flat tensor in ParamLayout(cfg), whose embedding reserves
// padded_vocab() rows. Those rows hold `pad` (a writer kept them zero; a
// loader must not trust them).
void write_version_one(const std::string& from, const std::string& to, const ModelConfig& cfg,
                       float pad) {
  const ParamLayout padded(cfg);
  const std::map<std::string, TensorData> v2 = tensors_of(from);
  NamedTensors flat;
  for (const char* block : {"params", "adam_m", "adam_v"}) {
    std::vector<float> values(static_cast<std::size_t>(padded.total()), 0.0f);
    for (const ParamSlot& slot : padded.slots()) {
      const TensorData& t = v2.at(std::string(block) + "." + slot.name);
      EXPECT_EQ(t.shape, (std::vector<std::int64_t>{slot.rows, slot.cols}));
      std::memcpy(values.data() + slot.offset, t.bytes.data(), t.bytes.size());
    }
    const ParamSlot& e = padded.embedding();
    for (std::int64_t i = e.numel(); i < e.stored_numel(); ++i) values[e.offset + i] = pad;
    TensorData t;
    t.dtype = "F32";
    t.shape = {padded.total()};
    t.bytes.resize(values.size() * sizeof(float));
    std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
    flat.emplace_back(block, std::move(t));
  }
  std::map<std::string, std::string> meta = read_safetensors_metadata(from);
  meta["version"] = "1";
  write_safetensors(to, flat, meta);
}

class CheckpointVocab : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("tinyllama_ckpt_vocab_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // 1 warm-up + 5 timed steps never stopped, saving its weights to a.st.
  TrainSummary uninterrupted() {
    TrainOptions o = odd_vocab_run(dir_ / "a", 5);
    o.save_weights = (dir_ / "a.st").string();
    return train(o, {});
  }
  // Resumed from the newest checkpoint in `ck` to the same 5 timed steps.
  TrainSummary resumed(const fs::path& ck) {
    TrainOptions o = odd_vocab_run(ck, 5);
    o.resume = ck.string();
    o.save_weights = (ck / "b.st").string();
    return train(o, {});
  }

  fs::path dir_;
};

TEST_F(CheckpointVocab, HoldsTheEmbeddingsVocabSizeRowsInEveryBlock) {
  const TrainOptions o = odd_vocab_run(dir_, 1);
  ASSERT_EQ(o.model.padded_vocab(), 128);
  train(o, {});
  const std::string path = latest_checkpoint(dir_.string());
  EXPECT_EQ(read_safetensors_metadata(path).at("version"), "2");
  const std::map<std::string, TensorData> t = tensors_of(path);
  const ParamLayout layout(o.model);
  ASSERT_EQ(t.size(), 3 * layout.slots().size());
  for (const char* block : {"params", "adam_m", "adam_v"}) {
    const TensorData& e = t.at(std::string(block) + ".embedding");
    EXPECT_EQ(e.shape, (std::vector<std::int64_t>{kVocab, kHidden})) << block;
    EXPECT_EQ(e.bytes.size(), std::size_t{kVocab} * kHidden * sizeof(float)) << block;
  }
  // Every tensor is one parameter at its own shape: nothing padded anywhere.
  for (const ParamSlot& slot : layout.slots()) {
    EXPECT_EQ(t.at("adam_v." + slot.name).shape, (std::vector<std::int64_t>{slot.rows, slot.cols}))
        << slot.name;
  }
}

TEST_F(CheckpointVocab, ResumedRunIsBitIdenticalToAnUninterruptedOne) {
  const TrainSummary a = uninterrupted();
  const fs::path ck = dir_ / "b";
  train(odd_vocab_run(ck, 2), {});  // stopped after 1 + 2 steps
  const TrainSummary b = resumed(ck);
  ASSERT_EQ(a.steps.size(), 5u);
  ASSERT_EQ(b.steps.size(), 3u);
  const std::vector<double> all = losses(a);
  const std::vector<double> tail(all.begin() + 2, all.end());
  EXPECT_TRUE(same_bits(tail, losses(b))) << "losses after the resume differ";
  EXPECT_NE(a.steps[2].loss, a.steps[4].loss) << "the run trains";
  EXPECT_EQ(read_bytes(dir_ / "a.st"), read_bytes(ck / "b.st")) << "weights differ";
  // Both runs end with a checkpoint at 6 steps: weights and moments alike.
  const auto end_a = tensors_of(checkpoint_path((dir_ / "a").string(), 6));
  const auto end_b = tensors_of(checkpoint_path(ck.string(), 6));
  ASSERT_EQ(end_a.size(), end_b.size());
  for (const auto& [name, t] : end_a) {
    EXPECT_EQ(t.bytes, end_b.at(name).bytes) << name;
  }
}

TEST_F(CheckpointVocab, PaddedRowsAreZeroAfterLoading) {
  const TrainOptions o = odd_vocab_run(dir_, 1);
  train(o, {});
  const std::string path = latest_checkpoint(dir_.string());
  CpuBackend cpu;
  Model model(o.model, o.shape, o.plan, cpu);
  std::vector<double> dirty(static_cast<std::size_t>(model.layout().total()), 0.5);
  model.set_params(dirty);  // padded rows too: loading must clear them
  load_checkpoint(path, model, o);
  const std::vector<double> p = model.params();
  const std::vector<double> m = model.adam_m();
  const std::vector<double> v = model.adam_v();
  ASSERT_EQ(padded_rows(model).size(), std::size_t{128 - kVocab} * kHidden);
  for (std::size_t i : padded_rows(model)) {
    ASSERT_EQ(p[i], 0.0) << "weight " << i;
    ASSERT_EQ(m[i], 0.0) << "first moment " << i;
    ASSERT_EQ(v[i], 0.0) << "second moment " << i;
  }
  // The vocabulary's rows are the file's, and trained (their moments moved).
  const std::map<std::string, TensorData> file = tensors_of(path);
  const TensorData& e = file.at("params.embedding");
  std::vector<float> saved(static_cast<std::size_t>(kVocab) * kHidden);
  std::memcpy(saved.data(), e.bytes.data(), e.bytes.size());
  const std::size_t base = static_cast<std::size_t>(model.layout().embedding().offset);
  for (std::size_t i = 0; i < saved.size(); ++i) ASSERT_EQ(p[base + i], saved[i]) << i;
  double moved = 0;
  for (std::size_t i = 0; i < saved.size(); ++i) moved += v[base + i];
  EXPECT_GT(moved, 0.0);
}

TEST_F(CheckpointVocab, ReadsTheFlatPaddedVersionOneFormat) {
  const TrainOptions o = odd_vocab_run(dir_ / "ck", 2);
  train(o, {});
  const std::string v2 = latest_checkpoint((dir_ / "ck").string());
  const fs::path old_dir = dir_ / "old";
  fs::create_directories(old_dir);
  const std::string v1 = (old_dir / fs::path(v2).filename()).string();
  write_version_one(v2, v1, o.model, 0.25f);
  ASSERT_EQ(read_safetensors_metadata(v1).at("version"), "1");

  // The same state from either file, the old one's padded rows dropped.
  CpuBackend cpu;
  Model from_v1(o.model, o.shape, o.plan, cpu);
  Model from_v2(o.model, o.shape, o.plan, cpu);
  const CheckpointState s1 = load_checkpoint(v1, from_v1, o);
  const CheckpointState s2 = load_checkpoint(v2, from_v2, o);
  EXPECT_EQ(s1.steps_done, 3);
  EXPECT_EQ(s1.steps_done, s2.steps_done);
  EXPECT_EQ(s1.sampler, s2.sampler);
  EXPECT_TRUE(same_bits(from_v1.params(), from_v2.params()));
  EXPECT_TRUE(same_bits(from_v1.adam_m(), from_v2.adam_m()));
  EXPECT_TRUE(same_bits(from_v1.adam_v(), from_v2.adam_v()));
  const std::vector<double> m = from_v1.adam_m();
  for (std::size_t i : padded_rows(from_v1)) ASSERT_EQ(m[i], 0.0) << i;

  // And a run resumed from it ends where one never stopped does.
  const TrainSummary a = uninterrupted();
  const TrainSummary b = resumed(old_dir);
  ASSERT_EQ(b.steps.size(), 3u);
  for (std::size_t i = 0; i < b.steps.size(); ++i) {
    EXPECT_EQ(a.steps[2 + i].loss, b.steps[i].loss) << "timed step " << 3 + i;
  }
  EXPECT_EQ(read_bytes(dir_ / "a.st"), read_bytes(old_dir / "b.st")) << "weights differ";
}

TEST_F(CheckpointVocab, AnUnknownFormatVersionIsRefusedNamingBoth) {
  const TrainOptions o = odd_vocab_run(dir_, 1);
  train(o, {});
  const std::string path = latest_checkpoint(dir_.string());
  std::map<std::string, std::string> meta = read_safetensors_metadata(path);
  meta["version"] = "9";
  write_safetensors(path, read_safetensors(path), meta);
  CpuBackend cpu;
  Model model(o.model, o.shape, o.plan, cpu);
  try {
    load_checkpoint(path, model, o);
    FAIL() << "version 9 was read";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("version 9, this build reads 1 and 2"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tinyllama
