#include "train/batch_tune.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/errors.h"
#include "model/config_json.h"
#include "model/model.h"
#include "train/backend_factory.h"
#include "train/flag_values.h"
#include "train/memory_check.h"

namespace tinyllama {

std::int64_t predicted_peak_bytes(const TrainOptions& base, int batch) {
  const BatchShape shape{batch, base.shape.seq};
  const StepPlan plan = plan_for_run(base.request, base.plan.device, base.model, shape);
  return Model::estimate_memory(base.model, shape, plan).total();
}

int largest_fitting_batch(const TrainOptions& base, std::int64_t max_bytes, int limit) {
  auto fits = [&](int b) { return predicted_peak_bytes(base, b) <= max_bytes; };
  if (limit < 1 || !fits(1)) return 0;
  int good = 1;  // fits
  int bad = 0;   // 0: no batch known not to fit yet
  while (bad == 0) {
    const int next = good > limit / 2 ? limit : good * 2;
    if (next == good) return good;  // limit reached
    if (fits(next)) {
      good = next;
    } else {
      bad = next;
    }
  }
  while (bad - good > 1) {
    const int mid = good + (bad - good) / 2;
    (fits(mid) ? good : bad) = mid;
  }
  return good;
}

std::vector<int> candidate_batches(const std::vector<int>& asked, int largest) {
  if (!asked.empty()) return asked;
  std::vector<int> out;
  for (int b = 1; b <= largest; b *= 2) {
    out.push_back(b);
    if (b > largest / 2) break;
  }
  if (largest > 0 && out.back() != largest) out.push_back(largest);
  return out;
}

std::vector<int> parse_batch_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const int b = parse_int_flag("--batches", item);
    if (b < 1) throw UsageError("--batches " + text + ": each batch must be at least 1");
    if (!out.empty() && b <= out.back()) {
      throw UsageError("--batches " + text + ": list the batches in increasing order, once each");
    }
    out.push_back(b);
  }
  if (out.empty()) throw UsageError("--batches '" + text + "': expected a list such as 1,2,4,8");
  return out;
}

int best_point(const std::vector<TunePoint>& points) {
  int best = -1;
  for (int i = 0; i < static_cast<int>(points.size()); ++i) {
    const TunePoint& p = points[static_cast<std::size_t>(i)];
    if (p.measured &&
        (best < 0 || p.tokens_per_s > points[static_cast<std::size_t>(best)].tokens_per_s)) {
      best = i;
    }
  }
  return best;
}

std::string format_tune_table(const TuneResult& r) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%7s  %12s  %12s  %10s  %10s  %s\n", "batch", "predicted",
                "tokens/s", "ms/step", "driver MB", "status");
  out += line;
  for (const TunePoint& p : r.points) {
    char tps[32] = "-";
    char ms[32] = "-";
    char used[32] = "-";
    if (p.measured) {
      std::snprintf(tps, sizeof tps, "%.0f", p.tokens_per_s);
      std::snprintf(ms, sizeof ms, "%.2f", p.ms_per_step);
    }
    if (p.measured && p.device_used_peak_mb > 0) {
      std::snprintf(used, sizeof used, "%.1f", p.device_used_peak_mb);
    }
    std::snprintf(line, sizeof line, "%7d  %12s  %12s  %10s  %10s  %s\n", p.batch,
                  format_bytes(p.predicted_bytes).c_str(), tps, ms, used, p.status.c_str());
    out += line;
  }
  out += "largest batch under " + format_bytes(r.max_bytes) + ": ";
  out += r.largest_batch > 0 ? std::to_string(r.largest_batch) + " (predicted " +
                                   format_bytes(r.largest_batch_bytes) + ")\n"
                             : "none (batch 1 needs more)\n";
  if (r.best >= 0) {
    const TunePoint& b = r.points[static_cast<std::size_t>(r.best)];
    std::snprintf(line, sizeof line, "best tokens/s: batch %d (%.0f tokens/s, %.2f ms/step)\n",
                  b.batch, b.tokens_per_s, b.ms_per_step);
    out += line;
  } else {
    out += "best tokens/s: none measured\n";
  }
  return out;
}

nlohmann::json tune_json(const TuneResult& r, const TrainOptions& base) {
  nlohmann::json points = nlohmann::json::array();
  for (const TunePoint& p : r.points) {
    auto measured = [&](double v) {
      return p.measured ? nlohmann::json(v) : nlohmann::json(nullptr);
    };
    points.push_back({{"batch", p.batch},
                      {"predicted_bytes", p.predicted_bytes},
                      {"fits", p.fits},
                      {"status", p.status},
                      {"measured", p.measured},
                      {"tokens_per_s", measured(p.tokens_per_s)},
                      {"ms_per_step", measured(p.ms_per_step)},
                      {"peak_mb", measured(p.peak_mb)},
                      {"device_used_peak_mb", measured(p.device_used_peak_mb)}});
  }
  const TunePoint* best = r.best >= 0 ? &r.points[static_cast<std::size_t>(r.best)] : nullptr;
  const ModelConfig& m = base.model;
  nlohmann::json config = model_shape_json(m);
  config.update({{"seq_len", base.shape.seq},
                 {"level", base.plan.level},
                 {"precision", precision_name(base.plan.precision)},
                 {"device", device_name(base.plan.device)},
                 {"warmup_steps", base.warmup_steps},
                 {"num_steps", base.num_steps}});
  return {{"max_memory_bytes", r.max_bytes},
          {"largest_batch", r.largest_batch},
          {"largest_batch_predicted_bytes", r.largest_batch_bytes},
          {"best_batch", best != nullptr ? nlohmann::json(best->batch) : nlohmann::json(nullptr)},
          {"best_tokens_per_s",
           best != nullptr ? nlohmann::json(best->tokens_per_s) : nlohmann::json(nullptr)},
          {"points", points},
          {"config", config}};
}

}  // namespace tinyllama
