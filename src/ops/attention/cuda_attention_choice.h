#pragma once
// What attention=cudnn and attention=auto need from the CUDA side: the
// cuDNN SDPA layout of this model's attention, whether cuDNN can run it, and
// a start-up timing of one layer's forward and backward per implementation
// (DeviceCaps::cudnn_attention and its timings, measured before the plan).
#include "model/step_plan.h"
#include "ops/attention/cudnn/cudnn_sdpa.h"

namespace tinyllama::cuda {

// The layout the model hands attention: q, k, v (and dq, dk, dv) column
// blocks of the [tokens, qkv_dim] buffers, out and dout [tokens, q_dim].
SdpaLayout model_sdpa_layout(const ModelConfig& cfg, BatchShape shape, DType dtype);

// "" when cuDNN SDPA runs this model's attention, else why not.
std::string cudnn_attention_support(const ModelConfig& cfg, BatchShape shape, Precision precision);

// Median forward and backward time of one layer's attention with `impl`
// (Flash, with `kernels`' families, or Cudnn) on random inputs at the
// model's layout, after warm-up. Allocates its own buffers and frees them
// before returning.
AttentionTiming time_attention(AttentionImpl impl, const ModelConfig& cfg, BatchShape shape,
                               Precision precision, const KernelChoices& kernels);

}  // namespace tinyllama::cuda
