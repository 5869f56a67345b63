#pragma once
// Dynamic loss scaling for fp16, with torch.cuda.amp.GradScaler's rules:
// start at 2^16; on a step whose gradients hold inf/nan, skip the update and
// halve the scale; after `growth_interval` clean steps in a row, double it.
// bf16 and fp32 runs use a fixed scale of 1 and never skip.
namespace tinyllama {

class LossScaler {
 public:
  explicit LossScaler(bool enabled, double initial = 65536.0, int growth_interval = 2000)
      : enabled_(enabled), scale_(enabled ? initial : 1.0), growth_interval_(growth_interval) {}

  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  int clean_steps() const { return clean_steps_; }
  // Back to a scale() and clean_steps() saved by a checkpoint.
  void restore(double scale, int clean_steps) {
    if (!enabled_) return;
    scale_ = scale;
    clean_steps_ = clean_steps;
  }

  // Record the outcome of a step taken at scale(); returns whether the
  // optimizer update was skipped.
  bool update(bool found_nonfinite) {
    if (!enabled_) return false;
    if (found_nonfinite) {
      scale_ *= 0.5;
      clean_steps_ = 0;
      return true;
    }
    if (++clean_steps_ >= growth_interval_) {
      scale_ *= 2.0;
      clean_steps_ = 0;
    }
    return false;
  }

 private:
  bool enabled_;
  double scale_;
  int growth_interval_;
  int clean_steps_ = 0;
};

}  // namespace tinyllama
