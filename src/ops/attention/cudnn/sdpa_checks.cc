#include "ops/attention/cudnn/sdpa_checks.h"

#include <cuda_runtime.h>

#include <cstdint>

#include "core/errors.h"
#include "ops/attention/cudnn/backend_descriptor.h"

namespace tinyllama::cuda::cudnn {

std::string layout_name(const SdpaLayout& l) {
  const AttentionShape& s = l.shape;
  std::string n("B");
  n += std::to_string(s.batch);
  n += " S" + std::to_string(s.seq);
  n += " H" + std::to_string(s.heads);
  n += " K" + std::to_string(s.kv_heads);
  n += " hd" + std::to_string(s.head_dim);
  n += " ";
  n += dtype_name(l.dtype);
  n += " ld " + std::to_string(l.ld_qkv) + "/" + std::to_string(l.ld_out);
  return n;
}

SdpaDims dims_of(const SdpaLayout& l) {
  SdpaDims d;
  d.batch = l.shape.batch;
  d.heads = l.shape.heads;
  d.kv_heads = l.shape.kv_heads;
  d.seq = l.shape.seq;
  d.head_dim = l.shape.head_dim;
  d.ld_qkv = l.ld_qkv;
  d.ld_out = l.ld_out;
  d.io = l.dtype == DType::F16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
  return d;
}

std::string layout_problem(const SdpaLayout& l) {
  const AttentionShape& s = l.shape;
  const std::string pre = "cuDNN SDPA (" + layout_name(l) + "): ";
  if (l.dtype != DType::BF16 && l.dtype != DType::F16) {
    return pre + "runs bfloat16 and float16 only (" + std::string(dtype_name(l.dtype)) +
           " stays on our kernels)";
  }
  if (s.batch <= 0 || s.seq <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.head_dim <= 0) {
    return pre + "every dimension must be positive";
  }
  if (s.heads % s.kv_heads != 0) return pre + "heads must be a multiple of kv_heads";
  // cuDNN's SDPA backward refuses S_q = S_kv = 1 (the frontend's support
  // check says so); the layout is one plan pair, so S = 1 is refused whole.
  if (s.seq == 1) return pre + "cuDNN's SDPA backward does not support S = 1";
  const std::int64_t qkv_cols = static_cast<std::int64_t>(s.heads + 2 * s.kv_heads) * s.head_dim;
  const std::int64_t out_cols = static_cast<std::int64_t>(s.heads) * s.head_dim;
  if (l.ld_qkv < qkv_cols || l.ld_out < out_cols) {
    return pre + "ld_qkv must be at least (H+2K)*hd and ld_out at least H*hd";
  }
  // cuDNN 9.14 builds plans for any row stride, but its kernels load rows
  // 16 bytes at a time: with a row stride off 16 bytes the backward faulted
  // with misaligned loads on an H100 (ld 514/258 in bf16).
  if (l.ld_qkv % 8 != 0 || l.ld_out % 8 != 0) {
    return pre + "row strides ld_qkv and ld_out must be multiples of 8 elements (16 bytes)";
  }

  int device = -1;
  int major = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    cudaGetLastError();  // clear it, so later CUDA calls do not report it
    return pre + "no CUDA device";
  }
  if (major < 8) return pre + "needs compute capability 8.0 or newer";
  // Head dims per the frontend's support surface for the backward (the
  // stricter pass): a multiple of 8, at most 256 on Hopper, 128 elsewhere.
  const int max_hd = major == 9 ? 256 : 128;
  if (s.head_dim % 8 != 0 || s.head_dim > max_hd) {
    return pre + "head_dim must be a multiple of 8 and at most " + std::to_string(max_hd) +
           " on this device";
  }

  const std::size_t version = cudnnGetVersion();
  if (version < 90000) return pre + "needs cuDNN 9 (found " + runtime_version_string() + ")";
  if (version == 91000 || version == 91001) {
    // Known-bad SDPA in these two releases (the frontend refuses them too).
    return pre + "cuDNN 9.10.0/9.10.1 have known SDPA bugs; use 9.10.2 or newer";
  }
  return "";
}

void require_mat(const char* op, const char* what, const Mat& m, std::int64_t rows,
                 std::int64_t cols, std::int64_t ld, DType dtype) {
  const auto fail = [&](const std::string& why) {
    throw RuntimeFailure(std::string(op) + ": " + what + " " + why);
  };
  if (m.dtype != dtype) {
    fail("is " + std::string(dtype_name(m.dtype)) + ", the plans are for " +
         std::string(dtype_name(dtype)));
  }
  if (m.rows != rows || m.cols != cols) {
    fail("is [" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + "], expected [" +
         std::to_string(rows) + ", " + std::to_string(cols) + "]");
  }
  if (m.ld != ld) {
    fail("has row stride " + std::to_string(m.ld) + ", the plans are for " + std::to_string(ld));
  }
  if (m.data == nullptr || reinterpret_cast<std::uintptr_t>(m.data) % 16 != 0) {
    fail("must be a non-null, 16-byte-aligned pointer");
  }
}

}  // namespace tinyllama::cuda::cudnn
