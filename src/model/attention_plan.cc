// Attention's part of the plan: which implementations can run on the
// device, an explicit choice's fallbacks, attention=auto's timing and the
// fastest pairing of the passes (flash, cudnn, cudnn+flash), the saved
// choice a resumed run takes, and the line that says what auto chose.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "model/plan_choices.h"
#include "model/step_plan.h"

namespace tinyllama {
namespace {

std::string join_ints(const std::vector<int>& values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return out;
}

// "" when our flash kernels run this head_dim on the device, else why not.
std::string flash_unsupported(const DeviceCaps& caps, const ModelConfig& cfg) {
  const std::vector<int>& dims = caps.flash_head_dims;
  if (dims.empty() || std::find(dims.begin(), dims.end(), cfg.head_dim()) != dims.end()) return "";
  return "the " + std::string(device_name(caps.kind)) + " flash kernels are built for head_dim " +
         join_ints(dims) + " (this model: " + std::to_string(cfg.head_dim()) + ")";
}

std::string cudnn_unsupported(const DeviceCaps& caps) {
  if (!caps.cudnn_attention) {
    return "the " + std::string(device_name(caps.kind)) + " backend has no cuDNN";
  }
  return *caps.cudnn_attention;
}

// Why a saved choice cannot run here, or "" when it can.
std::string saved_unrunnable(const SavedAttentionChoice& saved, const std::string& no_flash,
                             const std::string& no_cudnn) {
  switch (saved.chosen) {
    case AttentionImpl::Flash:
      return no_flash;
    case AttentionImpl::Cudnn:
      return no_cudnn;
    case AttentionImpl::CudnnFlash:
      return !no_cudnn.empty() ? no_cudnn : no_flash;
    case AttentionImpl::Auto:
      return "it names no implementation";
    case AttentionImpl::Materialized:
      break;
  }
  return "";
}

// The saved choice of attention=auto, when it can still run: taken as it
// was, with its times, and not timed again. Else a note saying why not.
bool reuse_attention(StepPlan& plan, const SavedAttentionChoice& saved, const std::string& no_flash,
                     const std::string& no_cudnn) {
  const std::string why = saved_unrunnable(saved, no_flash, no_cudnn);
  if (why.empty()) {
    plan.attention_auto = saved.how;
    plan.attention_auto.requested = true;
    plan.attention_auto.reused_from = saved.from;
    plan.ops.attention = saved.chosen;
    return true;
  }
  plan.attention_auto.notes.push_back(std::string(impl_name(saved.chosen)) + " from " + saved.from +
                                      " cannot run here (" + why + "): chosen again");
  return false;
}

// Two pairings this close in time are a tie: about the spread of the
// start-up timing from one run to the next (one 1 B run timed cuDNN's
// forward with our backward at 0.529 ms a layer against cuDNN's 0.530,
// another ranked them the other way).
constexpr double kAttentionTimeTie = 0.01;

struct AttentionCandidate {
  AttentionImpl impl;
  double ms;
  std::int64_t workspace_bytes;
};

// The pairings of two timed implementations' passes: flash, cudnn, or
// cuDNN's forward with our backward (one block of the larger workspace, as
// the step keeps). Not our forward with cuDNN's backward: our backward
// rotates dq and dk for RoPE in its epilogues (rope fused), cuDNN's leaves
// a pass over them.
std::array<AttentionCandidate, 3> attention_candidates(const AttentionAuto& a) {
  return {{{AttentionImpl::Flash, a.flash.total_ms(), a.flash.workspace_bytes},
           {AttentionImpl::Cudnn, a.cudnn.total_ms(), a.cudnn.workspace_bytes},
           {AttentionImpl::CudnnFlash, a.cudnn.forward_ms + a.flash.backward_ms,
            std::max(a.cudnn.forward_workspace_bytes, a.flash.workspace_bytes)}}};
}

AttentionCandidate fastest_of(const std::array<AttentionCandidate, 3>& c) {
  return *std::min_element(
      c.begin(), c.end(),
      [](const AttentionCandidate& x, const AttentionCandidate& y) { return x.ms < y.ms; });
}

// The fastest pairing; of those tied with it, the one with the smallest
// workspace (memory a step keeps for nothing else), then the fastest.
AttentionCandidate chosen_attention(const AttentionAuto& a) {
  const std::array<AttentionCandidate, 3> c = attention_candidates(a);
  AttentionCandidate best = fastest_of(c);
  const double limit = best.ms * (1 + kAttentionTimeTie);
  for (const AttentionCandidate& x : c) {
    if (x.ms > limit) continue;
    if (x.workspace_bytes < best.workspace_bytes ||
        (x.workspace_bytes == best.workspace_bytes && x.ms < best.ms)) {
      best = x;
    }
  }
  return best;
}

// attention=auto: the candidates that can run, timed when there are two;
// the fastest pairing is kept (of those tied with it, the smallest
// workspace). Neither: materialised, the one that runs anything.
// On resume, the checkpoint's choice instead, untimed.
void choose_attention(StepPlan& plan, const DeviceCaps& caps, const ModelConfig& cfg,
                      const std::optional<SavedAttentionChoice>& saved) {
  AttentionAuto& a = plan.attention_auto;
  a.requested = true;
  const std::string no_flash = flash_unsupported(caps, cfg);
  const std::string no_cudnn = cudnn_unsupported(caps);
  if (saved && reuse_attention(plan, *saved, no_flash, no_cudnn)) return;
  if (!no_flash.empty()) a.notes.push_back("flash: " + no_flash);
  if (!no_cudnn.empty()) a.notes.push_back("cudnn: " + no_cudnn);
  AttentionImpl& choice = plan.ops.attention;
  if (!no_flash.empty() && !no_cudnn.empty()) {
    choice = AttentionImpl::Materialized;
  } else if (!no_cudnn.empty()) {
    choice = AttentionImpl::Flash;
  } else if (!no_flash.empty()) {
    choice = AttentionImpl::Cudnn;
  } else if (!caps.flash_timing || !caps.cudnn_timing) {
    // Both run but nothing timed them (a device without timers): our own
    // kernels, the level's default.
    a.notes.push_back("no timer on this device: flash kept untimed");
    choice = AttentionImpl::Flash;
  } else {
    a.flash = *caps.flash_timing;
    a.cudnn = *caps.cudnn_timing;
    a.flash_timed = a.cudnn_timed = true;
    choice = chosen_attention(a).impl;
  }
}

void resolve_mixed_attention(StepPlan& plan, const DeviceCaps& caps, const ModelConfig& cfg) {
  AttentionImpl& choice = plan.ops.attention;
  const std::string no_cudnn = cudnn_unsupported(caps);
  if (!no_cudnn.empty()) {
    fall_back(plan, "attention", choice, AttentionImpl::Flash, no_cudnn);
  } else if (const std::string no_flash = flash_unsupported(caps, cfg); !no_flash.empty()) {
    fall_back(plan, "attention", choice, AttentionImpl::Cudnn, no_flash);
  }
}

std::string ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", v);
  return buf;
}

}  // namespace

bool attention_timings_wanted(const PlanRequest& request, const DeviceCaps& caps,
                              const ModelConfig& cfg) {
  if (request.ops.attention != AttentionImpl::Auto || !caps.times_attention) return false;
  const std::string no_flash = flash_unsupported(caps, cfg);
  const std::string no_cudnn = cudnn_unsupported(caps);
  if (!no_flash.empty() || !no_cudnn.empty()) return false;
  return !request.saved_attention ||
         !saved_unrunnable(*request.saved_attention, no_flash, no_cudnn).empty();
}

void resolve_attention(StepPlan& plan, const DeviceCaps& caps, const ModelConfig& cfg,
                       const std::optional<SavedAttentionChoice>& saved) {
  AttentionImpl& choice = plan.ops.attention;
  if (choice == AttentionImpl::Auto) {
    choose_attention(plan, caps, cfg, saved);
    return;
  }
  if (choice == AttentionImpl::CudnnFlash) resolve_mixed_attention(plan, caps, cfg);
  if (choice == AttentionImpl::Cudnn) {
    const std::string why = cudnn_unsupported(caps);
    // fp32, or no cuDNN: our kernels run every precision.
    if (!why.empty()) fall_back(plan, "attention", choice, AttentionImpl::Flash, why);
  }
  if (choice == AttentionImpl::Flash) {
    const std::string why = flash_unsupported(caps, cfg);
    if (!why.empty()) fall_back(plan, "attention", choice, AttentionImpl::Materialized, why);
  }
}

std::string AttentionAuto::describe(AttentionImpl chosen) const {
  if (!requested) return "";
  std::string out = std::string("auto chose ") + impl_name(chosen);
  if (!reused_from.empty()) out += " (as in " + reused_from + ", not timed again)";
  if (flash_timed && cudnn_timed) {
    const bool cudnn_first = cudnn.total_ms() < flash.total_ms();
    const auto part = [](const char* name, const AttentionTiming& t) {
      return std::string(name) + " " + ms(t.total_ms()) + " (fwd " + ms(t.forward_ms) + ", bwd " +
             ms(t.backward_ms) + ")";
    };
    out += " per layer: ";
    if (chosen == AttentionImpl::CudnnFlash) {
      out += "cudnn+flash " + ms(cudnn.forward_ms + flash.backward_ms) +
             " (cudnn's fwd, flash's bwd), ";
    }
    out += cudnn_first ? part("cudnn", cudnn) + ", " + part("flash", flash)
                       : part("flash", flash) + ", " + part("cudnn", cudnn);
  }
  if (flash_timed && cudnn_timed) {
    const AttentionCandidate fastest = fastest_of(attention_candidates(*this));
    const AttentionCandidate picked = chosen_attention(*this);
    if (picked.impl == chosen && fastest.impl != chosen) {
      char tie[200];
      std::snprintf(tie, sizeof tie,
                    "; within %.0f %% of the fastest (%s), the smaller workspace: %.1f MB "
                    "against %.1f MB",
                    kAttentionTimeTie * 100, impl_name(fastest.impl),
                    static_cast<double>(picked.workspace_bytes) / 1e6,
                    static_cast<double>(fastest.workspace_bytes) / 1e6);
      out += tie;
    }
  }
  for (const std::string& n : notes) out += "; " + n;
  return out;
}

AttentionImpl forward_attention(AttentionImpl v) {
  return v == AttentionImpl::CudnnFlash ? AttentionImpl::Cudnn : v;
}
AttentionImpl backward_attention(AttentionImpl v) {
  return v == AttentionImpl::CudnnFlash ? AttentionImpl::Flash : v;
}

}  // namespace tinyllama
