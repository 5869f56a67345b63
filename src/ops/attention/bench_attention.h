#pragma once
// The kernel bench's cases of attention (op_registry.cc names them and
// their variants).
#include <memory>

#include "bench/op_case.h"
#include "model/kernel_choices.h"

namespace tinyllama::bench {

// Causal GQA attention, materialised (probs kept), flash or cuDNN's SDPA.
// pins: the flash kernel families a variant pins (KernelPins' flash_*),
// carried by the plan the backend is prepared with (the variant's
// ImplChoice); make_attention takes them to skip, with the reason, a pinned
// family that cannot run here rather than time the kernel that would run in
// its place.
// rope: attention_rope_forward (q and k rotated as the kernels load them,
// the rotated q, k and v's copy written out) or attention_rope_backward
// (RoPE's inverse rotation of dq and dk inside the attention backward).
std::unique_ptr<OpCase> make_attention(BenchContext& ctx, Pass pass, AttentionImpl impl,
                                       const KernelPins& pins = {}, bool rope = false);

}  // namespace tinyllama::bench
