#pragma once
// The points of `tinyllama bench`: every combination of the levels,
// precisions, batch sizes and sequence lengths asked for, each optionally
// repeated with one plan choice switched (the ablation). A point is named by
// its key, which a later run's report is matched on (regression.h).
#include <string>
#include <vector>

#include "model/step_plan.h"

namespace tinyllama::suite {

// One plan choice switched alone: its name in reports ("qkv_fusion off")
// and the train flags that switch it.
struct ChoiceSwitch {
  std::string name;
  std::vector<std::string> train_args;
};

struct BenchPoint {
  std::string level;      // v1, v2, ...
  std::string precision;  // fp32, bf16, fp16
  int batch = 0;
  int seq = 0;
  ChoiceSwitch variant;  // name empty: the level's preset as it is

  // "v2 bf16 B8 S128", plus " [qkv_fusion off]" for a switched choice.
  std::string key() const;
  // The train flags of this point (level, precision, shape, variant), not
  // the model, step counts or outputs, which the bench adds.
  std::vector<std::string> train_args() const;
};

struct BenchAxes {
  std::vector<std::string> levels;
  std::vector<std::string> precisions;
  std::vector<int> batches;
  std::vector<int> seqs;
};

// The default matrix: every implemented level, fp32 and bf16,
// S 128/512/1024 at B8.
BenchAxes default_axes();

// Every point, levels outermost, then precision, batch, seq. Each axis is
// checked (UsageError naming the flag and the bad value).
std::vector<BenchPoint> expand(const BenchAxes& axes);

// Each plan choice a preset can switch alone through train's flags, set to
// the value the preset does not have: qkv_fusion, swiglu_fusion, attention
// (materialized against flash), cuda_graphs, fused_optimizer, norm, loss.
std::vector<ChoiceSwitch> ablation_switches(const OpChoices& preset);

// The switches among ablation_switches(later) that undo a difference from
// earlier: the fusions `later` adds over `earlier`, each switched back alone.
std::vector<ChoiceSwitch> switches_between(const OpChoices& earlier, const OpChoices& later);

// Each point followed by one point per switch of its level's preset.
std::vector<BenchPoint> with_ablation(const std::vector<BenchPoint>& points);

// "v1,v2" -> {"v1", "v2"}; "all" -> every implemented level.
std::vector<std::string> parse_level_list(const std::string& text);
// "fp32,bf16" (fp32, bf16, fp16; "bfloat16"/"float16" accepted).
std::vector<std::string> parse_precision_list(const std::string& text);
// "128,512,1024": positive integers.
std::vector<int> parse_int_list(const std::string& flag, const std::string& text);

}  // namespace tinyllama::suite
