#pragma once
// The learning rate of every optimizer step (docs/TRAINING.md, "Learning-rate
// schedules"). Steps are counted 0-based over the whole run, the untimed
// --warmup-steps included (they train too), so a resumed run continues the
// schedule where the checkpoint left it. With W warm-up steps, T steps in
// all, peak P and floor M, step s has
//   s < W:            P * (s + 1) / W                        (linear warm-up)
//   constant:         P
//   cosine:           M + (P - M) * (1 + cos(pi * p)) / 2,   p = (s - W) / (T - W)
//   linear:           M + (P - M) * (1 - p)
//   wsd:              P until T - D, then M + (P - M) * (1 - (s - (T - D)) / D)
// (warmup-stable-decay: D decay steps at the end). The decays reach M one
// step past the last, as llm.c's and nanoGPT's (lr_decay_iters = T) do.
#include <string>

namespace tinyllama {

enum class LrDecay { Constant, Cosine, Linear, Wsd };

struct LrSchedule {
  LrDecay decay = LrDecay::Constant;
  double peak = 3e-4;   // --learning-rate
  double floor = 0;     // --min-lr (the decays' end)
  int warmup = 0;       // --lr-warmup-steps
  int decay_steps = 0;  // wsd's D
  int total = 1;        // optimizer steps in the run: --warmup-steps + --num-steps

  // The learning rate of 0-based step `step` (< total).
  double at(int step) const;
  // One line for the run header: "cosine 3e-4 -> 3e-5 over 1000 steps, 100 warm-up".
  std::string describe() const;
};

// "constant", "cosine", "linear", "wsd"; parse throws UsageError naming the flag.
const char* lr_decay_name(LrDecay d);
LrDecay parse_lr_decay(const std::string& text);

}  // namespace tinyllama
