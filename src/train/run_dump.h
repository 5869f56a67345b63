#pragma once
// --dump-dir: the initial weights, every timed batch and step 1's gradients,
// so an independent implementation can replay the run (tests/python).
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "model/config.h"
#include "model/model.h"

namespace tinyllama {

// Writes nothing when its directory is "" (no --dump-dir).
class RunDump {
 public:
  explicit RunDump(std::string dir);
  bool enabled() const { return !dir_.empty(); }
  void initial_weights(const Model& m) const;
  // A timed step's rows (every micro-batch's), kept until finish().
  void batch(int step, const std::vector<std::int32_t>& rows, BatchShape shape);
  // The gradients of the mean loss: fp16 runs hold them multiplied by the
  // loss scale in force, which is divided out here.
  void gradients(const Model& m, double loss_scale) const;
  void finish() const;

 private:
  std::string dir_;
  std::vector<std::pair<std::string, TensorData>> batches_;
};

}  // namespace tinyllama
