#include "train/run_dump.h"

#include <cstring>
#include <filesystem>

#include "io/hf_weights.h"

namespace tinyllama {
namespace {

// A step's rows (every micro-batch's), [rows, seq + 1].
TensorData token_tensor(const std::vector<std::int32_t>& rows, int seq) {
  TensorData t;
  t.dtype = "I32";
  t.shape = {static_cast<std::int64_t>(rows.size()) / (seq + 1), seq + 1};
  t.bytes.resize(rows.size() * sizeof(std::int32_t));
  std::memcpy(t.bytes.data(), rows.data(), t.bytes.size());
  return t;
}

}  // namespace

RunDump::RunDump(std::string dir) : dir_(std::move(dir)) {
  if (!dir_.empty()) std::filesystem::create_directories(dir_);
}

void RunDump::initial_weights(const Model& m) const {
  if (enabled()) save_hf_weights(dir_ + "/init.safetensors", m.layout(), m.params());
}

void RunDump::batch(int step, const std::vector<std::int32_t>& rows, BatchShape shape) {
  if (enabled())
    batches_.emplace_back("step" + std::to_string(step), token_tensor(rows, shape.seq));
}

void RunDump::gradients(const Model& m, double loss_scale) const {
  if (!enabled()) return;
  std::vector<double> g = m.grads();
  for (double& x : g) x /= loss_scale;
  write_safetensors(dir_ + "/grads_step1.safetensors", to_hf_tensors(m.layout(), g, DType::F32),
                    {{"producer", "tinyllama"}, {kRopeLayoutKey, kRotateHalf}});
}

void RunDump::finish() const {
  if (enabled()) write_safetensors(dir_ + "/batches.safetensors", batches_);
}

}  // namespace tinyllama
