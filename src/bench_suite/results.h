#pragma once
// What one bench point measured: read from the JSON report of its train run
// (train/report.h) and, beside it, the PyTorch peer's figures. A point that
// failed keeps its error line instead of figures.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "bench_suite/matrix.h"

namespace tinyllama::suite {

// The model flags every point of a bench shares, as train takes them.
struct ModelFlags {
  int vocab_size = 1000;
  int hidden_dim = 512;
  int num_layers = 8;
  int num_heads = 8;
  int num_kv_heads = 0;  // 0: train's default (H/2, or H when H is odd)
  int ffn_dim = 0;       // 0: train's default (4 D)

  int kv_heads() const;
  int ffn() const;
  std::vector<std::string> train_args() const;
  // "D512 L8 H8 K4 F2048 vocab 1000": part of every point's identity.
  std::string describe() const;
};

struct PeerResult {
  std::string variant;  // "eager", "compile" (torch.compile, CUDA graphs)
  bool ok = false;
  std::string error;
  double ms_per_step = 0;  // median over the timed steps
  // Over the whole run, warm-up and compilation included; NaN where not
  // measured (a CPU peer).
  double peak_mb = 0;
};

struct PointResult {
  BenchPoint point;
  std::string model;  // ModelFlags::describe()
  bool ok = false;
  std::string error;              // the failed run's last error line
  double ms_per_step = 0;         // train's own figure (mean of the timed steps)
  double median_ms_per_step = 0;  // median of the timed steps
  double tokens_per_s = 0;
  double samples_per_s = 0;
  double peak_mb = 0;
  double final_loss = 0;
  std::optional<int> kernel_launches_per_step;  // null on the CPU backend
  // The GPU's median SM clock over the timed steps and the share of its
  // samples the power cap held it down (train --json "clocks"); empty on
  // the CPU or where nothing was sampled. A step's time moves with them.
  std::optional<double> sm_mhz;
  std::optional<double> power_capped_pct;
  std::vector<PeerResult> peers;

  // The identity a baseline is matched on: the model and the point's key.
  std::string match_key() const { return model + " | " + point.key(); }
  const PeerResult* peer(const std::string& variant) const;
};

// Fills the figures of `result` from a train --json report; throws
// RuntimeFailure naming a missing key.
void read_train_json(const nlohmann::json& report, PointResult& result);

// A train --json report's clock over its timed steps (its "clocks"): the
// median SM clock and the share of samples the power cap held it down;
// empty where the report has none (the CPU, nothing sampled, --profile).
struct TrainClock {
  double sm_mhz = 0;
  double power_capped_pct = 0;
};
std::optional<TrainClock> train_report_clock(const nlohmann::json& report);

// A peer's figures from the JSON scripts/peer/torch_peer.py writes; throws
// RuntimeFailure naming a missing key.
PeerResult read_peer_json(const nlohmann::json& report);

// Text made safe for one cell of a Markdown table: '|' escaped, line breaks
// as spaces, cut to max_chars (with "...") so a long kernel name or error
// cannot swamp the table.
std::string markdown_cell(const std::string& text, std::size_t max_chars = 160);

// v with `digits` decimals ("%.*f"), with its sign always shown when sign
// is set ("%+.*f"): the figures of the bench and compare tables and lines.
std::string fixed(double v, int digits, bool sign = false);

}  // namespace tinyllama::suite
