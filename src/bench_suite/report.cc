#include "bench_suite/report.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "bench_suite/ablation.h"
#include "core/errors.h"

namespace tinyllama::suite {
namespace {

constexpr const char* kTool = "tinyllama bench";

nlohmann::json peer_json(const PeerResult& p) {
  return {{"variant", p.variant},
          {"status", p.ok ? "ok" : "failed"},
          {"error", p.error},
          {"ms_per_step", p.ok ? nlohmann::json(p.ms_per_step) : nullptr},
          {"peak_mb", p.ok && std::isfinite(p.peak_mb) ? nlohmann::json(p.peak_mb) : nullptr}};
}

nlohmann::json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json point_json(const PointResult& r) {
  const auto figure = [&](double v) { return r.ok ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json peers = nlohmann::json::array();
  for (const PeerResult& p : r.peers) peers.push_back(peer_json(p));
  return {{"key", r.point.key()},
          {"model", r.model},
          {"level", r.point.level},
          {"precision", r.point.precision},
          {"batch_size", r.point.batch},
          {"seq_len", r.point.seq},
          {"variant", r.point.variant.name},
          {"variant_args", r.point.variant.train_args},
          {"status", r.ok ? "ok" : "failed"},
          {"error", r.error},
          {"ms_per_step", figure(r.ms_per_step)},
          {"median_ms_per_step", figure(r.median_ms_per_step)},
          {"tokens_per_s", figure(r.tokens_per_s)},
          {"samples_per_s", figure(r.samples_per_s)},
          {"peak_mb", figure(r.peak_mb)},
          {"final_loss", figure(r.final_loss)},
          {"kernel_launches_per_step", r.kernel_launches_per_step
                                           ? nlohmann::json(*r.kernel_launches_per_step)
                                           : nlohmann::json(nullptr)},
          {"sm_mhz_median", optional_json(r.sm_mhz)},
          {"power_capped_pct", optional_json(r.power_capped_pct)},
          {"peers", peers}};
}

std::optional<double> optional_number(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j.at(key).is_number() ? std::optional<double>(j.at(key).get<double>())
                                                  : std::nullopt;
}

// "1710 MHz, capped 100 %" for the tables; "-" where the clock is unknown.
std::string clock_cell(const PointResult& r) {
  if (!r.sm_mhz) return "-";
  return fixed(*r.sm_mhz, 0) + " MHz, capped " + fixed(r.power_capped_pct.value_or(0), 0) + " %";
}

double number_or_zero(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j.at(key).is_number() ? j.at(key).get<double>() : 0.0;
}

PointResult point_from_json(const nlohmann::json& j) {
  PointResult r;
  r.point.level = j.at("level").get<std::string>();
  r.point.precision = j.at("precision").get<std::string>();
  r.point.batch = j.at("batch_size").get<int>();
  r.point.seq = j.at("seq_len").get<int>();
  r.point.variant.name = j.value("variant", "");
  r.point.variant.train_args = j.value("variant_args", std::vector<std::string>());
  r.model = j.at("model").get<std::string>();
  r.ok = j.at("status").get<std::string>() == "ok";
  r.error = j.value("error", "");
  r.ms_per_step = number_or_zero(j, "ms_per_step");
  r.median_ms_per_step = number_or_zero(j, "median_ms_per_step");
  r.tokens_per_s = number_or_zero(j, "tokens_per_s");
  r.samples_per_s = number_or_zero(j, "samples_per_s");
  r.peak_mb = number_or_zero(j, "peak_mb");
  r.final_loss = number_or_zero(j, "final_loss");
  const nlohmann::json launches = j.value("kernel_launches_per_step", nlohmann::json());
  if (launches.is_number()) r.kernel_launches_per_step = launches.get<int>();
  r.sm_mhz = optional_number(j, "sm_mhz_median");
  r.power_capped_pct = optional_number(j, "power_capped_pct");
  for (const nlohmann::json& p : j.value("peers", nlohmann::json::array())) {
    PeerResult peer;
    peer.variant = p.at("variant").get<std::string>();
    peer.ok = p.at("status").get<std::string>() == "ok";
    peer.error = p.value("error", "");
    peer.ms_per_step = number_or_zero(p, "ms_per_step");
    peer.peak_mb = p.contains("peak_mb") && p.at("peak_mb").is_number()
                       ? p.at("peak_mb").get<double>()
                       : std::numeric_limits<double>::quiet_NaN();
    r.peers.push_back(peer);
  }
  return r;
}

// The peer variants any point has, in first-seen order.
std::vector<std::string> peer_variants(const BenchReport& report) {
  std::vector<std::string> out;
  for (const PointResult& r : report.points) {
    for (const PeerResult& p : r.peers) {
      bool seen = false;
      for (const std::string& v : out) seen = seen || v == p.variant;
      if (!seen) out.push_back(p.variant);
    }
  }
  return out;
}

// The point of the first level with the same precision, shape and model
// (and no switched choice): what "speed-up per level" is measured against.
const PointResult* first_level_point(const BenchReport& report, const PointResult& r) {
  for (const PointResult& o : report.points) {
    if (o.point.variant.name.empty() && o.model == r.model &&
        o.point.precision == r.point.precision && o.point.batch == r.point.batch &&
        o.point.seq == r.point.seq) {
      return &o;
    }
  }
  return nullptr;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string quoted = "\"";
  for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace

nlohmann::json to_json(const BenchReport& report) {
  nlohmann::json points = nlohmann::json::array();
  for (const PointResult& r : report.points) points.push_back(point_json(r));
  return {{"tool", kTool},
          {"environment", report.environment},
          {"device", report.device},
          {"model", report.model},
          {"num_steps", report.num_steps},
          {"warmup_steps", report.warmup_steps},
          {"points", points}};
}

BenchReport report_from_json(const nlohmann::json& j) {
  if (!j.is_object() || j.value("tool", "") != kTool) {
    throw RuntimeFailure("not a tinyllama bench report (no \"tool\": \"tinyllama bench\")");
  }
  BenchReport report;
  try {
    report.environment = j.at("environment").get<std::map<std::string, std::string>>();
    report.device = j.at("device").get<std::string>();
    report.model = j.at("model").get<std::string>();
    report.num_steps = j.at("num_steps").get<int>();
    report.warmup_steps = j.at("warmup_steps").get<int>();
    for (const nlohmann::json& p : j.at("points")) report.points.push_back(point_from_json(p));
  } catch (const nlohmann::json::exception& e) {
    throw RuntimeFailure(std::string("bench report: ") + e.what());
  }
  return report;
}

std::string to_csv(const BenchReport& report) {
  const std::vector<std::string> peers = peer_variants(report);
  std::string out =
      "key,model,level,precision,batch_size,seq_len,variant,status,ms_per_step,"
      "median_ms_per_step,tokens_per_s,samples_per_s,peak_mb,kernel_launches_per_step,final_loss,"
      "sm_mhz_median,power_capped_pct";
  for (const std::string& v : peers) out += ",peer_" + v + "_ms,peer_" + v + "_peak_mb";
  out += ",error\n";
  for (const PointResult& r : report.points) {
    const auto figure = [&](double v, int digits) { return r.ok ? fixed(v, digits) : ""; };
    out += csv_field(r.point.key()) + "," + csv_field(r.model) + "," + r.point.level + "," +
           r.point.precision + "," + std::to_string(r.point.batch) + "," +
           std::to_string(r.point.seq) + "," + csv_field(r.point.variant.name) + "," +
           (r.ok ? "ok" : "failed") + "," + figure(r.ms_per_step, 4) + "," +
           figure(r.median_ms_per_step, 4) + "," + figure(r.tokens_per_s, 1) + "," +
           figure(r.samples_per_s, 2) + "," + figure(r.peak_mb, 1) + "," +
           (r.kernel_launches_per_step ? std::to_string(*r.kernel_launches_per_step) : "") + "," +
           figure(r.final_loss, 5) + "," + (r.sm_mhz ? fixed(*r.sm_mhz, 0) : "") + "," +
           (r.power_capped_pct ? fixed(*r.power_capped_pct, 1) : "");
    for (const std::string& v : peers) {
      const PeerResult* p = r.peer(v);
      out += "," + (p && p->ok ? fixed(p->ms_per_step, 4) : "") + "," +
             (p && p->ok && std::isfinite(p->peak_mb) ? fixed(p->peak_mb, 1) : "");
    }
    out += "," + csv_field(r.error) + "\n";
  }
  return out;
}

std::string to_markdown(const BenchReport& report) {
  const std::vector<std::string> peers = peer_variants(report);
  std::string out = "# tinyllama bench\n\n";
  out += "Model " + report.model + ", " + std::to_string(report.warmup_steps) + " warm-up + " +
         std::to_string(report.num_steps) + " timed steps per point, device " + report.device +
         ".\n\n| environment | |\n|---|---|\n";
  for (const auto& [name, value] : report.environment) {
    out += "| " + name + " | " + markdown_cell(value) + " |\n";
  }
  out +=
      "\nms/step is train's own figure (mean of the timed steps); SM clock is the GPU's median "
      "clock over them and the share of its samples the power cap held it down (the same code "
      "runs slower at a lower clock); speed-up is against the first level's point of the same "
      "precision and shape";
  out += peers.empty() ? ".\n\n"
                       : "; the peer columns are PyTorch's median ms/step and its peak "
                         "memory over the whole run, and tinyllama's speed-up over it (median "
                         "against median).\n\n";
  out += "| point | ms/step | median ms | tokens/s | peak MB | launches/step | SM clock | speed-up";
  for (const std::string& v : peers) out += " | torch " + v + " ms | torch " + v + " MB | vs " + v;
  out += " |\n|---|---:|---:|---:|---:|---:|---:|---:";
  for (std::size_t i = 0; i < peers.size(); ++i) out += "|---:|---:|---:";
  out += "|\n";
  for (const PointResult& r : report.points) {
    if (!r.ok) {
      out += "| " + r.point.key() + " | failed: " + markdown_cell(r.error) + " |";
      for (std::size_t i = 0; i < 6 + 3 * peers.size(); ++i) out += " |";
      out += "\n";
      continue;
    }
    const PointResult* base = first_level_point(report, r);
    const std::string speedup = base && base->ok && r.ms_per_step > 0
                                    ? fixed(base->ms_per_step / r.ms_per_step, 2) + "x"
                                    : "";
    out += "| " + r.point.key() + " | " + fixed(r.ms_per_step, 3) + " | " +
           fixed(r.median_ms_per_step, 3) + " | " + fixed(r.tokens_per_s, 0) + " | " +
           fixed(r.peak_mb, 1) + " | " +
           (r.kernel_launches_per_step ? std::to_string(*r.kernel_launches_per_step) : "-") +
           " | " + clock_cell(r) + " | " + speedup;
    for (const std::string& v : peers) {
      const PeerResult* p = r.peer(v);
      if (p && p->ok) {
        out += " | " + fixed(p->ms_per_step, 3) + " | " +
               (std::isfinite(p->peak_mb) ? fixed(p->peak_mb, 1) : "-") + " | " +
               fixed(p->ms_per_step / r.median_ms_per_step, 2) + "x";
      } else {
        out += " | " + std::string(p ? "failed" : "-") + " | | ";
      }
    }
    out += " |\n";
  }
  const std::vector<AblationRow> ablation = ablation_rows(report.points);
  if (!ablation.empty()) {
    out +=
        "\n## Ablation\n\nEach point again with one plan choice switched alone; the effect is "
        "the switched run's ms/step minus the preset's (positive: the preset's choice saves "
        "that much).\n\n" +
        ablation_markdown(ablation);
  }
  return out;
}

}  // namespace tinyllama::suite
