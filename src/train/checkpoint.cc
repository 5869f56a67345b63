#include "train/checkpoint.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <regex>
#include <utility>

#include "core/errors.h"
#include "io/hf_weights.h"
#include "io/safetensors.h"
#include "model/data_parallel.h"
#include "model/step_plan_json.h"

namespace tinyllama {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "tinyllama-checkpoint";
// 2: a tensor per parameter and block ("params.embedding", [vocab_size,
// D]). 1, still read: one flat tensor per block ("params", "adam_m",
// "adam_v") in ParamLayout(cfg), the embedding's padded rows included.
constexpr const char* kVersion = "2";
constexpr const char* kVersionFlat = "1";

struct BlockName {
  Model::StateBlock block;
  const char* name;
};
// In the order gather_checkpoint_state reads them.
constexpr BlockName kBlocks[] = {{Model::StateBlock::Params, "params"},
                                 {Model::StateBlock::AdamM, "adam_m"},
                                 {Model::StateBlock::AdamV, "adam_v"}};

std::string real_text(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", x);
  return text;
}

// Rows per step over all ranks (--batch-size is per rank): what the sampler
// draws each step, so a run resumes on another number of ranks as long as
// the global batch stays the same.
int global_batch(const TrainOptions& o) {
  return o.shape.batch * (o.plan.parallel.enabled ? o.plan.parallel.world : 1);
}

// What a resumed run must share with the run that saved the checkpoint, by
// the flag that sets it; all as text, compared as text. "--batch-size"
// holds the global batch (the same number for a run of one process).
std::vector<std::pair<std::string, std::string>> run_identity(const TrainOptions& o) {
  const ModelConfig& m = o.model;
  const Precision& p = o.plan.precision;
  return {{"--vocab-size", std::to_string(m.vocab_size)},
          {"--hidden-dim", std::to_string(m.hidden_dim)},
          {"--num-layers", std::to_string(m.num_layers)},
          {"--num-heads", std::to_string(m.num_heads)},
          {"--num-kv-heads", std::to_string(m.num_kv_heads)},
          {"--ffn-dim", std::to_string(m.ffn_dim)},
          {"--seq-len", std::to_string(o.shape.seq)},
          {"--batch-size", std::to_string(global_batch(o))},
          {"--learning-rate", real_text(o.learning_rate)},
          {"--use-amp/--amp-dtype", p.mixed() ? amp_dtype_name(p) : std::string("off (fp32)")},
          {"--fp8-scaling",
           fp8_scaling_name(p.fp8_linears ? o.plan.fp8.scaling : Fp8Scaling::Current)}};
}

// The training recipe's part of the identity (train/recipe.h). A decaying
// schedule names its length, so a resume that changes --num-steps under it
// is refused rather than jumping to another curve. Checkpoints older than
// the recipe hold none of these keys: they were saved with the defaults.
std::vector<std::pair<std::string, std::string>> recipe_identity(const TrainOptions& o) {
  const TrainingRecipe& r = o.recipe;
  const int world = o.plan.parallel.enabled ? o.plan.parallel.world : 1;
  return {{"--grad-accum-steps", std::to_string(micro_batches(o, world))},
          {"--lr-schedule", lr_schedule(o).describe()},
          {"--grad-clip", real_text(r.grad_clip)},
          {"--weight-decay", real_text(r.weight_decay)},
          {"--decay-params", r.decay_matrices_only ? "matrices" : "all"},
          {"--adam-beta1", real_text(r.adam_beta1)},
          {"--adam-beta2", real_text(r.adam_beta2)},
          {"--adam-eps", real_text(r.adam_eps)}};
}

// The value a checkpoint without `flag` was saved with: the default recipe's.
std::string default_identity(const TrainOptions& o, const std::string& flag) {
  if (flag == "--fp8-scaling") return fp8_scaling_name(Fp8Scaling::Current);
  TrainOptions defaults = o;
  defaults.recipe = TrainingRecipe{};
  for (const auto& [name, value] : recipe_identity(defaults)) {
    if (name == flag) return value;
  }
  return "?";
}

std::vector<std::pair<std::string, std::string>> full_identity(const TrainOptions& o) {
  std::vector<std::pair<std::string, std::string>> all = run_identity(o);
  for (auto& entry : recipe_identity(o)) all.push_back(std::move(entry));
  return all;
}

std::string tensor_name(const BlockName& b, const ParamSlot& slot) {
  return std::string(b.name) + "." + slot.name;
}

// Block `b` of the model's state as one [rows, cols] tensor per parameter,
// appended to `out`: the slots of Model::state_layout() (the embedding's
// vocab_size rows), without the padding between them.
void append_block(const Model& model, const BlockName& b, NamedTensors& out) {
  const std::vector<std::uint8_t> flat = model.state_bytes(b.block);
  const std::size_t elem = dtype_size(model.precision().master);
  for (const ParamSlot& slot : model.state_layout().slots()) {
    TensorData t;
    t.dtype = hf_dtype(model.precision().master);
    t.shape = {slot.rows, slot.cols};
    const auto begin = flat.begin() + static_cast<std::ptrdiff_t>(slot.offset * elem);
    t.bytes.assign(begin, begin + static_cast<std::ptrdiff_t>(slot.numel() * elem));
    out.emplace_back(tensor_name(b, slot), std::move(t));
  }
}

// The version-2 tensors of `path` as the model's state blocks, in
// Model::state_layout(). Every tensor must be there, in the model's dtype
// and shape, and nothing else.
std::map<std::string, TensorData> fitting_tensors(const std::string& path, const Model& model,
                                                  NamedTensors file) {
  std::map<std::string, TensorData> by_name;
  for (auto& entry : file) by_name.emplace(entry.first, std::move(entry.second));
  std::size_t expected = 0;
  for (const BlockName& b : kBlocks) {
    for (const ParamSlot& slot : model.state_layout().slots()) {
      const std::string name = tensor_name(b, slot);
      const auto it = by_name.find(name);
      if (it == by_name.end()) throw RuntimeFailure(path + ": tensor '" + name + "' is missing");
      if (it->second.dtype != hf_dtype(model.precision().master) ||
          it->second.shape != std::vector<std::int64_t>{slot.rows, slot.cols}) {
        throw RuntimeFailure(path + ": tensor '" + name + "' does not fit this model");
      }
      ++expected;
    }
  }
  if (by_name.size() != expected) {
    throw RuntimeFailure(path + ": holds tensors this model does not have");
  }
  return by_name;
}

// Delayed FP8 scaling's state (Model::fp8_scaling_state): one fp32 tensor
// [blocks, kFp8Block], present exactly when the model keeps one.
constexpr const char* kFp8ScalingTensor = "fp8.scaling";

void append_fp8_scaling(const Model& model, NamedTensors& out) {
  const std::vector<float> blocks = model.fp8_scaling_state();
  if (blocks.empty()) return;
  TensorData t;
  t.dtype = hf_dtype(DType::F32);
  t.shape = {static_cast<std::int64_t>(blocks.size() / kFp8Block), kFp8Block};
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(blocks.data());
  t.bytes.assign(bytes, bytes + blocks.size() * sizeof(float));
  out.emplace_back(kFp8ScalingTensor, std::move(t));
}

// Takes the FP8 scaling tensor out of `file` into the model (the run's
// identity already matched the saved --fp8-scaling).
void load_fp8_scaling(const std::string& path, Model& model, NamedTensors& file) {
  const auto it = std::find_if(file.begin(), file.end(),
                               [](const auto& entry) { return entry.first == kFp8ScalingTensor; });
  const std::size_t expected = model.fp8_scaling_floats();
  if (expected == 0) return;  // fitting_tensors refuses a tensor this model does not keep
  if (it == file.end()) {
    throw RuntimeFailure(path + ": tensor '" + kFp8ScalingTensor + "' is missing");
  }
  const TensorData& t = it->second;
  if (t.dtype != hf_dtype(DType::F32) || t.bytes.size() != expected * sizeof(float)) {
    throw RuntimeFailure(path + ": tensor '" + kFp8ScalingTensor + "' does not fit this model");
  }
  std::vector<float> blocks(expected);
  std::memcpy(blocks.data(), t.bytes.data(), t.bytes.size());
  model.set_fp8_scaling_state(blocks);
  file.erase(it);
}

void load_tensors(const std::string& path, Model& model) {
  NamedTensors file = read_safetensors(path);
  load_fp8_scaling(path, model, file);
  std::map<std::string, TensorData> tensors = fitting_tensors(path, model, std::move(file));
  const std::size_t elem = dtype_size(model.precision().master);
  const ParamLayout& layout = model.state_layout();
  for (const BlockName& b : kBlocks) {
    std::vector<std::uint8_t> flat(static_cast<std::size_t>(layout.total()) * elem, 0);
    for (const ParamSlot& slot : layout.slots()) {
      TensorData& t = tensors.at(tensor_name(b, slot));
      std::copy(t.bytes.begin(), t.bytes.end(),
                flat.begin() + static_cast<std::ptrdiff_t>(slot.offset * elem));
      t.bytes = {};  // freed as it is copied: a block is held twice at most
    }
    model.set_state_bytes(b.block, flat);
  }
}

// Version 1: each block flat in ParamLayout(cfg), whose embedding reserves
// padded_vocab() rows; they are dropped here (set_state_bytes zeroes them).
void load_flat_tensors(const std::string& path, Model& model) {
  const ParamLayout padded(model.config());
  const std::size_t elem = dtype_size(model.precision().master);
  const NamedTensors file = read_safetensors(path);
  if (file.size() != std::size(kBlocks)) {
    throw RuntimeFailure(path + ": holds " + std::to_string(file.size()) +
                         " tensors, not params, adam_m and adam_v");
  }
  for (const auto& [name, t] : file) {
    const BlockName* b = nullptr;
    for (const BlockName& known : kBlocks) {
      if (name == known.name) b = &known;
    }
    if (b == nullptr || t.dtype != hf_dtype(model.precision().master) ||
        t.shape != std::vector<std::int64_t>{padded.total()}) {
      throw RuntimeFailure(path + ": tensor '" + name + "' does not fit this model");
    }
    std::vector<std::uint8_t> flat(static_cast<std::size_t>(model.state_elements()) * elem, 0);
    copy_slots(padded, t.bytes.data(), model.state_layout(), flat.data(), elem);
    model.set_state_bytes(b->block, flat);
  }
}

// The checkpoint's "state" metadata, after checking that `path` is a
// checkpoint this build reads; its format version into `version`.
nlohmann::json read_state(const std::string& path, std::string* version = nullptr) {
  const std::map<std::string, std::string> meta = read_safetensors_metadata(path);
  const auto format = meta.find("format");
  const auto state_text = meta.find("state");
  if (format == meta.end() || format->second != kFormat || state_text == meta.end()) {
    throw UsageError("--resume " + path + ": not a tinyllama checkpoint");
  }
  if (meta.count("version") == 0 ||
      (meta.at("version") != kVersion && meta.at("version") != kVersionFlat)) {
    throw UsageError("--resume " + path + ": checkpoint format version " +
                     (meta.count("version") ? meta.at("version") : "?") + ", this build reads " +
                     kVersionFlat + " and " + kVersion);
  }
  if (version != nullptr) *version = meta.at("version");
  try {
    return nlohmann::json::parse(state_text->second);
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure(path + ": the checkpoint's state is damaged (" + e.what() + ")");
  }
}

int steps_of(const fs::path& file) {
  static const std::regex kName(R"(ckpt-([0-9]{8,9})\.safetensors)");
  std::smatch m;
  const std::string name = file.filename().string();
  return std::regex_match(name, m, kName) ? std::stoi(m[1].str()) : -1;
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int steps_done) {
  char name[40];
  std::snprintf(name, sizeof name, "ckpt-%08d.safetensors", steps_done);
  return (fs::path(dir) / name).string();
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int, std::string>> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const int steps = steps_of(e.path());
    if (steps >= 0 && e.is_regular_file(ec)) found.emplace_back(steps, e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  out.reserve(found.size());
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

void gather_checkpoint_state(const Model& model) {
  // save_checkpoint's reads, in its order: each is a collective when the
  // optimizer is sharded.
  for (const BlockName& b : kBlocks) (void)model.state_bytes(b.block);
}

std::string save_checkpoint(const std::string& dir, const Model& model,
                            const CheckpointState& state, const TrainOptions& opts, int keep) {
  nlohmann::json identity = nlohmann::json::object();
  for (const auto& [flag, value] : full_identity(opts)) identity[flag] = value;
  nlohmann::json meta = {{"steps_done", state.steps_done},
                         {"applied_updates", state.applied_updates},
                         {"next_lr", state.next_lr},
                         {"loss_scale", state.loss_scale},
                         {"clean_steps", state.clean_steps},
                         {"sampler", state.sampler},
                         {"run", identity},
                         {"tuning", state.tuning}};
  if (opts.plan.attention_auto.requested) {
    meta["attention_auto"] = attention_choice_json(opts.plan);
  }
  NamedTensors tensors;
  for (const BlockName& b : kBlocks) append_block(model, b, tensors);
  append_fp8_scaling(model, tensors);
  std::string path = checkpoint_path(dir, state.steps_done);
  write_safetensors(path, tensors,
                    {{"format", kFormat}, {"version", kVersion}, {"state", meta.dump()}});
  if (keep > 0) {
    std::vector<std::string> all = list_checkpoints(dir);
    for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < all.size(); ++i) {
      std::error_code ec;
      fs::remove(all[i], ec);  // an old checkpoint left behind is harmless
    }
  }
  return path;
}

std::string latest_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UsageError("--resume " + dir + ": no such directory");
  const std::vector<std::string> all = list_checkpoints(dir);
  if (all.empty()) {
    throw UsageError("--resume " + dir + ": no checkpoint in it (ckpt-<steps>.safetensors)");
  }
  return all.back();
}

std::optional<SavedAttentionChoice> saved_attention_choice(const std::string& path) {
  const nlohmann::json s = read_state(path);
  if (!s.contains("attention_auto")) return std::nullopt;
  return attention_choice_from_json(s.at("attention_auto"), path);
}

CheckpointState load_checkpoint(const std::string& path, Model& model, const TrainOptions& opts) {
  std::string version;
  const nlohmann::json s = read_state(path, &version);
  try {
    const nlohmann::json& saved = s.at("run");
    for (const auto& [flag, value] : full_identity(opts)) {
      const std::string was = saved.value(flag, default_identity(opts, flag));
      if (was == value) continue;
      if (flag == "--batch-size" && global_batch(opts) != opts.shape.batch) {
        throw UsageError("--batch-size " + std::to_string(opts.shape.batch) + " on " +
                         std::to_string(opts.plan.parallel.world) + " ranks (" + value +
                         " rows per step): the checkpoint " + path + " was saved with " + was +
                         " rows per step; keep --batch-size times the ranks at " + was);
      }
      throw UsageError(flag + " " + value + ": the checkpoint " + path + " was saved with " + flag +
                       " " + was +
                       (flag == "--batch-size" ? " (rows per step over all ranks)" : ""));
    }
    CheckpointState out;
    out.steps_done = s.at("steps_done").get<int>();
    out.applied_updates = s.at("applied_updates").get<int>();
    out.loss_scale = s.at("loss_scale").get<double>();
    out.clean_steps = s.at("clean_steps").get<int>();
    out.sampler = s.at("sampler");
    out.tuning = s.value("tuning", std::string());
    out.next_lr = s.value("next_lr", 0.0);
    if (version == kVersionFlat) {
      load_flat_tensors(path, model);
    } else {
      load_tensors(path, model);
    }
    return out;
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure(path + ": the checkpoint's state is damaged (" + e.what() + ")");
  }
}

}  // namespace tinyllama
