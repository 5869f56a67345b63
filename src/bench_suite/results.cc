#include "bench_suite/results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/errors.h"
#include "core/median.h"
#include "model/config.h"

namespace tinyllama::suite {

int ModelFlags::kv_heads() const {
  return num_kv_heads > 0 ? num_kv_heads : ModelConfig::default_kv_heads(num_heads);
}

int ModelFlags::ffn() const {
  return ffn_dim > 0 ? ffn_dim : ModelConfig::default_ffn_dim(hidden_dim);
}

std::vector<std::string> ModelFlags::train_args() const {
  return {"--vocab-size",   std::to_string(vocab_size), "--hidden-dim", std::to_string(hidden_dim),
          "--num-layers",   std::to_string(num_layers), "--num-heads",  std::to_string(num_heads),
          "--num-kv-heads", std::to_string(kv_heads()), "--ffn-dim",    std::to_string(ffn())};
}

std::string ModelFlags::describe() const {
  return "D" + std::to_string(hidden_dim) + " L" + std::to_string(num_layers) + " H" +
         std::to_string(num_heads) + " K" + std::to_string(kv_heads()) + " F" +
         std::to_string(ffn()) + " vocab " + std::to_string(vocab_size);
}

const PeerResult* PointResult::peer(const std::string& variant) const {
  for (const PeerResult& p : peers) {
    if (p.variant == variant) return &p;
  }
  return nullptr;
}

std::string markdown_cell(const std::string& text, std::size_t max_chars) {
  const bool cut = text.size() > max_chars;
  std::string out;
  for (char c : cut ? text.substr(0, max_chars) : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return cut ? out + "..." : out;
}

std::string fixed(double v, int digits, bool sign) {
  char text[64];
  std::snprintf(text, sizeof text, sign ? "%+.*f" : "%.*f", digits, v);
  return text;
}

PeerResult read_peer_json(const nlohmann::json& report) {
  PeerResult p;
  try {
    p.variant = report.at("variant").get<std::string>();
    p.ms_per_step = report.at("ms_per_step").get<double>();
    const nlohmann::json& peak = report.at("peak_mb");
    p.peak_mb = peak.is_number() ? peak.get<double>() : std::numeric_limits<double>::quiet_NaN();
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure(std::string("peer report: ") + e.what());
  }
  p.ok = true;
  return p;
}

void read_train_json(const nlohmann::json& report, PointResult& result) {
  auto need = [&](const char* key) -> const nlohmann::json& {
    if (!report.contains(key) || report.at(key).is_null()) {
      throw RuntimeFailure(std::string("train report has no \"") + key + "\"");
    }
    return report.at(key);
  };
  result.ms_per_step = need("ms_per_step").get<double>();
  result.tokens_per_s = need("tokens_per_s").get<double>();
  result.samples_per_s = need("samples_per_s").get<double>();
  result.peak_mb = need("peak_mb").get<double>();
  result.final_loss = need("final_loss").get<double>();
  std::vector<double> step_ms;
  for (const nlohmann::json& s : need("steps")) step_ms.push_back(s.at("ms").get<double>());
  result.median_ms_per_step = median(step_ms);
  const nlohmann::json launches = report.value("kernel_launches_per_step", nlohmann::json());
  result.kernel_launches_per_step =
      launches.is_number() ? std::optional<int>(launches.get<int>()) : std::nullopt;
  if (const std::optional<TrainClock> clock = train_report_clock(report)) {
    result.sm_mhz = clock->sm_mhz;
    result.power_capped_pct = clock->power_capped_pct;
  }
  result.ok = true;
}

std::optional<TrainClock> train_report_clock(const nlohmann::json& report) {
  const nlohmann::json clocks =
      report.is_object() ? report.value("clocks", nlohmann::json()) : nlohmann::json();
  if (!clocks.is_object() || !clocks.contains("sm_mhz_median")) return std::nullopt;
  return TrainClock{clocks.at("sm_mhz_median").get<double>(),
                    clocks.value("reasons_pct", nlohmann::json::object()).value("power cap", 0.0)};
}

}  // namespace tinyllama::suite
