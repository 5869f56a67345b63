#pragma once
// `tinyllama tune`'s arithmetic: the memory a batch size needs (exact, the
// plan's figure: what the memory check refuses by and the summary reports
// as the peak), the largest batch under a memory target, the candidate
// batches to measure, and the pick among the measured ones. The runs
// themselves are the CLI's (cli/tune_command.cc: a child process each).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "train/options.h"

namespace tinyllama {

// The bytes a run of `base` (device chosen: base.plan.device) needs at batch
// size `batch`: Model::estimate_memory of the plan resolved at that shape
// (a plan's workspaces and loss chunks depend on it).
std::int64_t predicted_peak_bytes(const TrainOptions& base, int batch);

// The largest batch in [1, limit] whose predicted peak is at most
// max_bytes, or 0 when not even batch 1 fits. The prediction grows with
// the batch, so a doubling then a bisection finds it in O(log limit) plans.
int largest_fitting_batch(const TrainOptions& base, std::int64_t max_bytes, int limit);

// The batches to measure: `asked` when given (those above `largest` are
// kept, marked as not fitting, and not run), else the powers of two up to
// `largest` and `largest` itself.
std::vector<int> candidate_batches(const std::vector<int>& asked, int largest);

// "1,2,4,8" -> {1, 2, 4, 8}: positive, strictly increasing. Throws
// UsageError naming --batches.
std::vector<int> parse_batch_list(const std::string& text);

// One candidate batch and what its run gave.
struct TunePoint {
  int batch = 0;
  std::int64_t predicted_bytes = 0;
  bool fits = false;
  // "ok", "skipped (over --max-memory)", or why the run failed ("exit 1:
  // <its error line>").
  std::string status;
  bool measured = false;
  double tokens_per_s = 0;
  double ms_per_step = 0;
  double peak_mb = 0;              // the run's reported peak (the plan's figure)
  double device_used_peak_mb = 0;  // the driver's count (CUDA; 0 on the cpu)
};

// The index of the measured point with the most tokens/s, or -1.
int best_point(const std::vector<TunePoint>& points);

struct TuneResult {
  std::int64_t max_bytes = 0;
  int largest_batch = 0;  // largest_fitting_batch
  std::int64_t largest_batch_bytes = 0;
  std::vector<TunePoint> points;
  int best = -1;  // best_point(points)
};

// The table `tune` prints: one row per point, then the two answers.
std::string format_tune_table(const TuneResult& r);
// {"max_memory_bytes", "largest_batch", "largest_batch_predicted_bytes",
//  "best_batch", "best_tokens_per_s", "points": [...], "config"}.
nlohmann::json tune_json(const TuneResult& r, const TrainOptions& base);

}  // namespace tinyllama
