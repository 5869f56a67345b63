#pragma once
// RoPE on the GPU.
// Host-side launchers: each checks its arguments, enqueues on the given
// stream and checks the launch; none allocates or synchronises.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/mat.h"

namespace tinyllama::cuda {

// cuda_rope.cu. inverse = the backward pass.
void rope(Mat x, int seq, int head_dim, double theta, bool inverse, cudaStream_t stream);
// RopeImpl::Fused: the (cos, sin) fp32 pairs of every (position < seq,
// pair) angle, as rope() forms them (flash_attention.h's RopeTable), into
// cos_sin, rope_table_bytes() bytes.
std::int64_t rope_table_bytes(int seq, int head_dim);
void rope_table(float* cos_sin, int seq, int head_dim, double theta, cudaStream_t stream);

}  // namespace tinyllama::cuda
