#pragma once
// Everything a training run is configured by. The CLI fills it; the trainer
// and the reports read it.
#include <cstdint>
#include <string>

#include "model/config.h"

namespace tinyllama {

enum class DeviceKind { Cpu, Cuda };

struct TrainOptions {
  ModelConfig model;
  BatchShape shape{8, 256};
  LevelOptions level = LevelOptions::v2();
  std::string level_name = "v2";  // preset the toggles started from
  Precision precision = Precision::fp32();
  DeviceKind device = DeviceKind::Cpu;

  int num_steps = 50;
  int warmup_steps = 5;  // trained but untimed, before the measured steps
  double learning_rate = 3e-4;
  std::uint64_t seed = 1234;
  int data_pool_rows = 1000;
  int log_every = 10;

  std::string json_path;     // --json: machine-readable summary
  std::string save_weights;  // --save-weights: safetensors after training
  std::string init_from;     // --init-from: safetensors to start from
  std::string dump_dir;      // --dump-dir: initial weights, batches, step-1 grads (parity tests)

  bool profile = false;                 // --profile: record the first profile_steps timed steps
  std::string profile_dir = "profile";  // --profile-dir: where the profile files go
  int profile_steps = 5;                // --profile-steps
  bool profile_api_calls = false;       // --profile-api-calls: API records in eager profiled steps
};

}  // namespace tinyllama
