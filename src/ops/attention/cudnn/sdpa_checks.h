#pragma once
// What can be decided about a layout before asking cuDNN, and the checks
// each call makes of its arguments against the layout its plans were built
// for (a plan bakes in shapes and strides: other Mats would be read wrong).
#include <cstdint>
#include <string>

#include "core/mat.h"
#include "ops/attention/cudnn/cudnn_sdpa.h"
#include "ops/attention/cudnn/sdpa_graphs.h"

namespace tinyllama::cuda::cudnn {

// "B2 S128 H8 K4 hd64 bfloat16 ld 1024/512", for messages.
std::string layout_name(const SdpaLayout& l);

// "" when nothing known rules the layout out before building plans;
// otherwise one line saying why (dtype, head_dim, S = 1, strides, device,
// cuDNN version). Reads the current device's compute capability.
std::string layout_problem(const SdpaLayout& l);

SdpaDims dims_of(const SdpaLayout& l);

// RuntimeFailure unless m is [rows, cols] of the layout's dtype with row
// stride ld and a 16-byte-aligned pointer (the alignment the plans declare).
void require_mat(const char* op, const char* what, const Mat& m, std::int64_t rows,
                 std::int64_t cols, std::int64_t ld, DType dtype);

}  // namespace tinyllama::cuda::cudnn
