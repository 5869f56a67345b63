#include "train/lr_schedule.h"

#include <cmath>
#include <cstdio>

#include "core/errors.h"

namespace tinyllama {

double LrSchedule::at(int step) const {
  if (step < warmup) return peak * (step + 1) / warmup;
  const double span = peak - floor;
  switch (decay) {
    case LrDecay::Constant:
      return peak;
    case LrDecay::Cosine: {
      const double p = static_cast<double>(step - warmup) / (total - warmup);
      return floor + span * (1.0 + std::cos(M_PI * p)) / 2.0;
    }
    case LrDecay::Linear: {
      const double p = static_cast<double>(step - warmup) / (total - warmup);
      return floor + span * (1.0 - p);
    }
    case LrDecay::Wsd: {
      const int start = total - decay_steps;
      if (step < start) return peak;
      return floor + span * (1.0 - static_cast<double>(step - start) / decay_steps);
    }
  }
  return peak;
}

std::string LrSchedule::describe() const {
  char line[160];
  if (decay == LrDecay::Constant) {
    std::snprintf(line, sizeof line, "constant %g", peak);
  } else if (decay == LrDecay::Wsd) {
    std::snprintf(line, sizeof line, "wsd %g, the last %d of %d steps decaying to %g", peak,
                  decay_steps, total, floor);
  } else {
    std::snprintf(line, sizeof line, "%s %g -> %g over %d steps", lr_decay_name(decay), peak, floor,
                  total);
  }
  std::string out = line;
  if (warmup > 0) out += ", " + std::to_string(warmup) + " warm-up";
  return out;
}

const char* lr_decay_name(LrDecay d) {
  switch (d) {
    case LrDecay::Constant:
      return "constant";
    case LrDecay::Cosine:
      return "cosine";
    case LrDecay::Linear:
      return "linear";
    case LrDecay::Wsd:
      return "wsd";
  }
  return "constant";
}

LrDecay parse_lr_decay(const std::string& text) {
  for (LrDecay d : {LrDecay::Constant, LrDecay::Cosine, LrDecay::Linear, LrDecay::Wsd}) {
    if (text == lr_decay_name(d)) return d;
  }
  throw UsageError("--lr-schedule " + text + ": expected constant, cosine, linear or wsd");
}

}  // namespace tinyllama
