// Flash attention (level v2), host side: argument checks, the dtype and
// head-dim dispatch, and the public functions of flash_attention.h. The design
// (online softmax, causal tile ranges, GQA without repeats, tails) and a map
// of the folder are in README.md beside this file.
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "device/cuda_common.cuh"
#include "ops/attention/flash/flash_attention.h"
#include "ops/attention/flash/launch.cuh"
#include "ops/attention/flash/params.h"

namespace tinyllama::cuda {
namespace {

// The instantiated head_dims: kFlashHeadDims (flash_attention.h) lists the
// same four, and resolve_plan falls back to materialised attention for others.
static_assert(sizeof(kFlashHeadDims) / sizeof(kFlashHeadDims[0]) == 4 && kFlashHeadDims[0] == 32 &&
                  kFlashHeadDims[1] == 64 && kFlashHeadDims[2] == 96 && kFlashHeadDims[3] == 128,
              "dispatch_head_dim and kFlashHeadDims must list the same head_dims");

template <typename Fn>
void dispatch_head_dim(int hd, const char* op, Fn&& fn) {
  switch (hd) {
    case 32:
      fn(std::integral_constant<int, 32>{});
      return;
    case 64:
      fn(std::integral_constant<int, 64>{});
      return;
    case 96:
      fn(std::integral_constant<int, 96>{});
      return;
    case 128:
      fn(std::integral_constant<int, 128>{});
      return;
    default:
      break;
  }
  throw RuntimeFailure(std::string(op) + ": flash attention on CUDA supports head_dim 32, 64, 96 " +
                       "or 128, got " + std::to_string(hd));
}

bool aligned16(const Mat& m) {
  return reinterpret_cast<std::uintptr_t>(m.data) % 16 == 0 &&
         (m.ld * static_cast<std::int64_t>(dtype_size(m.dtype))) % 16 == 0;
}

flash::FlashDims check_flash(const char* name, const AttentionShape& s, Mat q, Mat k, Mat v,
                             Mat out, Mat lse) {
  require(s.batch > 0 && s.seq > 0 && s.heads > 0 && s.kv_heads > 0 && s.head_dim > 0, name,
          "attention shape must be positive");
  require(s.heads % s.kv_heads == 0, name, "heads must be a multiple of kv_heads");
  require(s.batch <= 65535 && s.heads <= 65535, name, "batch and heads must be at most 65535");
  const std::int64_t tokens = static_cast<std::int64_t>(s.batch) * s.seq;
  const std::int64_t qw = static_cast<std::int64_t>(s.heads) * s.head_dim;
  const std::int64_t kw = static_cast<std::int64_t>(s.kv_heads) * s.head_dim;
  require(q.rows == tokens && q.cols == qw, name, "q " + shape_str(q) + " does not match shape");
  require(out.rows == tokens && out.cols == qw, name, "out " + shape_str(out) + " does not match");
  require(k.rows == tokens && k.cols == kw, name, "k " + shape_str(k) + " does not match shape");
  require(v.rows == tokens && v.cols == kw, name, "v " + shape_str(v) + " does not match shape");
  require(lse.rows == static_cast<std::int64_t>(s.batch) * s.heads && lse.cols == s.seq, name,
          "lse must be [B*H, S], got " + shape_str(lse));
  require_dtype(name, lse, DType::F32);
  for (const Mat* m : {&k, &v, &out}) {
    require(m->dtype == q.dtype, name, "q, k, v and out must share one dtype");
  }
  return flash::FlashDims{s.batch, s.seq, s.heads, s.kv_heads, s.head_dim, s.heads / s.kv_heads};
}

void require_rope_table(const char* name, const RopeTable* rope, const flash::FlashDims& d) {
  require(
      rope != nullptr && rope->cos_sin != nullptr && rope->head_dim == d.hd && rope->seq >= d.seq,
      name,
      rope == nullptr ? std::string("no RoPE table")
                      : "the RoPE table (seq " + std::to_string(rope->seq) + ", head_dim " +
                            std::to_string(rope->head_dim) + ") does not cover seq " +
                            std::to_string(d.seq) + ", head_dim " + std::to_string(d.hd));
}

// Whether the bytes a and b span (first to last row) intersect.
bool overlap(const Mat& a, const Mat& b) {
  auto span = [](const Mat& m) {
    const auto* p = static_cast<const char*>(m.data);
    const std::int64_t bytes =
        ((m.rows - 1) * m.ld + m.cols) * static_cast<std::int64_t>(dtype_size(m.dtype));
    return std::pair<const char*, const char*>(p, p + (m.rows > 0 ? bytes : 0));
  };
  const auto [a0, a1] = span(a);
  const auto [b0, b1] = span(b);
  return a0 < b1 && b0 < a1;
}

// The softmax scale 1/sqrt(hd) times log2(e): the kernels compute scores in
// the exp2 domain.
float softmax_scale_log2(int hd) {
  return static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(hd)));
}

// A plan resolved for another device (its facts said Hopper) is refused
// rather than run as something it did not choose.
void require_hopper(const char* name, const char* family) {
  if (!flash_hopper_kernels_available()) {
    throw RuntimeFailure(std::string(name) + ": the plan runs the " + family +
                         " kernels, and this device cannot (" + hopper_kernels_missing() + ")");
  }
}

// The plan's forward family where it can run on these operands: the
// Hopper kernels need 16-byte accesses (the model's buffers always allow
// them) and a device that has them (the plan's facts said so).
FlashForwardKernel forward_kernel_for(const KernelChoices& kernels, const flash::FwdArgs& args) {
  if (kernels.flash_forward == FlashForwardKernel::Mma || !args.vec) return FlashForwardKernel::Mma;
  require_hopper("attention_forward (flash)", kernel_name(kernels.flash_forward));
  return kernels.flash_forward;
}

FlashBackwardKernel backward_kernel_for(const KernelChoices& kernels, const flash::BwdArgs& args) {
  if (kernels.flash_backward == FlashBackwardKernel::Mma || !args.vec) {
    return FlashBackwardKernel::Mma;
  }
  require_hopper("attention_backward (flash)", kernel_name(kernels.flash_backward));
  return kernels.flash_backward;
}

}  // namespace

bool flash_hopper_kernels_available() {
#if defined(TINYLLAMA_HOPPER_KERNELS)
  // Per device (the current one at each call); sm_90a code runs on 9.0 only.
  static std::once_flag once;
  static int count = 0;
  static std::vector<char> hopper;
  std::call_once(once, [] {
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    for (int d = 0; d < count; ++d) {
      cudaDeviceProp prop{};
      hopper.push_back(cudaGetDeviceProperties(&prop, d) == cudaSuccess && prop.major == 9 &&
                       prop.minor == 0);
    }
  });
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= count) return false;
  return hopper[static_cast<std::size_t>(dev)] != 0;
#else
  return false;
#endif
}

std::string hopper_kernels_missing() {
  return flash_hopper_kernels_available()
             ? std::string()
             : std::string("needs an sm_90a build on a compute-capability 9.0 device");
}

namespace {

// The fused backward's share of the scratch, in the order the pointers are
// carved: D, then the counters, then the accumulator, each 256-byte aligned.
struct ScratchLayout {
  std::int64_t rows = 0, counters = 0, acc_elems = 0;
  std::int64_t counters_at = 0, acc_at = 0, total = 0;
};

std::int64_t round256(std::int64_t bytes) {
  return (bytes + 255) / 256 * 256;
}

ScratchLayout scratch_layout(const AttentionShape& s, const KernelChoices& kernels) {
  ScratchLayout l;
  const std::int64_t bh = static_cast<std::int64_t>(s.batch) * s.heads;
  l.rows = bh * s.seq;
  l.total = round256(l.rows * static_cast<std::int64_t>(sizeof(float)));
  // Only where the plan runs the fused backward (the kernel bench and the
  // tests pin it; the default never runs it).
  if (flash_backward_fused(kernels) && (s.head_dim == 64 || s.head_dim == 128)) {
    l.counters = bh * ((s.seq + 63) / 64);
    l.acc_elems = l.rows * s.head_dim;
    l.counters_at = l.total;
    l.acc_at = l.counters_at + round256(l.counters * static_cast<std::int64_t>(sizeof(int)));
    l.total = l.acc_at + l.acc_elems * static_cast<std::int64_t>(sizeof(float));
  }
  return l;
}

}  // namespace

std::int64_t flash_attention_scratch_bytes(const AttentionShape& s, const KernelChoices& kernels) {
  return scratch_layout(s, kernels).total;
}

FlashScratch flash_attention_scratch(void* base, const AttentionShape& s,
                                     const KernelChoices& kernels) {
  const ScratchLayout l = scratch_layout(s, kernels);
  FlashScratch f;
  f.delta = static_cast<float*>(base);
  f.rows = l.rows;
  if (l.acc_elems > 0) {
    char* bytes = static_cast<char*>(base);
    f.dq_counters = reinterpret_cast<int*>(bytes + l.counters_at);
    f.dq_acc = reinterpret_cast<float*>(bytes + l.acc_at);
    f.counters = l.counters;
    f.dq_acc_elems = l.acc_elems;
  }
  return f;
}

namespace {

// The forward's RoPE outputs fit q, k and v and overlap none of them (other
// blocks still read the unrotated rows a block writes out).
void check_rope_forward(const char* name, const FlashRopeForward& rope, Mat q, Mat k, Mat v,
                        const flash::FlashDims& d) {
  require_rope_table(name, rope.table, d);
  require_same_shape(name, rope.q_rot, q);
  require_same_shape(name, rope.k_rot, k);
  require_same_shape(name, rope.v_copy, v);
  for (const Mat* m : {&rope.q_rot, &rope.k_rot, &rope.v_copy}) {
    require_dtype(name, *m, q.dtype);
    for (const Mat* in : {&q, &k, &v}) {
      require(!overlap(*m, *in), name, "q_rot, k_rot and v_copy must not overlap q, k or v");
    }
  }
}

flash::FwdArgs forward_args(Mat out, Mat lse, Mat q, Mat k, Mat v, const flash::FlashDims& d,
                            const FlashRopeForward* rope) {
  flash::FwdArgs args{};
  args.q = q.data;
  args.k = k.data;
  args.v = v.data;
  args.out = out.data;
  args.lse = lse.ptr<float>();
  args.ldq = q.ld;
  args.ldk = k.ld;
  args.ldv = v.ld;
  args.ldo = out.ld;
  args.ld_lse = lse.ld;
  args.seq = d.seq;
  args.heads = d.heads;
  args.group = d.group;
  args.scale_log2 = softmax_scale_log2(d.hd);
  args.vec = aligned16(q) && aligned16(k) && aligned16(v) && aligned16(out);
  if (rope != nullptr) {
    args.rope = rope->table->cos_sin;
    args.q_rot = rope->q_rot.data;
    args.k_rot = rope->k_rot.data;
    args.v_copy = rope->v_copy.data;
    args.ld_qr = rope->q_rot.ld;
    args.ld_kr = rope->k_rot.ld;
    args.ld_vc = rope->v_copy.ld;
    args.vec =
        args.vec && aligned16(rope->q_rot) && aligned16(rope->k_rot) && aligned16(rope->v_copy);
  }
  return args;
}

// A 16-bit forward at a head dim the Hopper kernels take: the plan's family.
template <typename T, int HD>
void launch_forward_family(FlashForwardKernel kernel, const flash::FwdArgs& args, Mat q, Mat k,
                           Mat v, const flash::FlashDims& d, cudaStream_t stream) {
  switch (kernel) {
    case FlashForwardKernel::Wgmma1x64:
      flash::launch_forward_wgmma<T, HD, 64, 1, false>(args, d, stream);
      break;
    case FlashForwardKernel::Wgmma1x128:
      flash::launch_forward_wgmma<T, HD, 128, 1, false>(args, d, stream);
      break;
    case FlashForwardKernel::Wgmma2x64:
      flash::launch_forward_wgmma<T, HD, 64, 2, false>(args, d, stream);
      break;
    case FlashForwardKernel::Wgmma2x128:
      flash::launch_forward_wgmma<T, HD, 128, 2, false>(args, d, stream);
      break;
    case FlashForwardKernel::Paired2x64:
      flash::launch_forward_wgmma<T, HD, 64, 2, true>(args, d, stream);
      break;
    case FlashForwardKernel::Paired2x128:
      flash::launch_forward_wgmma<T, HD, 128, 2, true>(args, d, stream);
      break;
    case FlashForwardKernel::Overlap1x64:
      flash::launch_forward_wgmma_overlap<T, HD, 64, 1>(args, d, stream);
      break;
    case FlashForwardKernel::Overlap2x64:
      flash::launch_forward_wgmma_overlap<T, HD, 64, 2>(args, d, stream);
      break;
    case FlashForwardKernel::Overlap2x128:
      flash::launch_forward_wgmma_overlap<T, HD, 128, 2>(args, d, stream);
      break;
    case FlashForwardKernel::Specialized64:
      flash::launch_forward_ws<T, HD, 64, 2, false>(args, q, k, v, d, stream);
      break;
    case FlashForwardKernel::Specialized128:
      flash::launch_forward_ws<T, HD, 128, 2, false>(args, q, k, v, d, stream);
      break;
    case FlashForwardKernel::PingPong64:
      flash::launch_forward_ws<T, HD, 64, 2, true>(args, q, k, v, d, stream);
      break;
    case FlashForwardKernel::PingPong128:
      flash::launch_forward_ws<T, HD, 128, 2, true>(args, q, k, v, d, stream);
      break;
    default:
      flash::launch_forward_tc<T, HD>(args, d, stream);
      break;
  }
}

}  // namespace

void flash_attention_forward(const KernelChoices& kernels, Mat out, Mat lse, Mat q, Mat k, Mat v,
                             const AttentionShape& shape, cudaStream_t stream,
                             const FlashRopeForward* rope) {
  const char* name = "attention_forward (flash)";
  const flash::FlashDims d = check_flash(name, shape, q, k, v, out, lse);
  if (rope != nullptr) check_rope_forward(name, *rope, q, k, v, d);
  const flash::FwdArgs args = forward_args(out, lse, q, k, v, d, rope);
  dispatch_head_dim(d.hd, name, [&](auto hd_tag) {
    constexpr int HD = decltype(hd_tag)::value;
    dispatch_float(q.dtype, name, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, float>) {
        flash::launch_forward_fp32<HD>(args, d, stream);
      } else if constexpr (!flash::hopper_head_dim(HD)) {
        flash::launch_forward_tc<T, HD>(args, d, stream);
      } else {
        launch_forward_family<T, HD>(forward_kernel_for(kernels, args), args, q, k, v, d, stream);
      }
    });
  });
}

namespace {

void check_backward(const char* name, const FlashScratch& scratch, Mat dq, Mat dk, Mat dv, Mat dout,
                    Mat q, Mat k, Mat v, std::int64_t rows) {
  require(dq.rows == q.rows && dq.cols == q.cols && dout.rows == q.rows && dout.cols == q.cols,
          name, "dq and dout must match q");
  require(dk.rows == k.rows && dk.cols == k.cols && dv.rows == v.rows && dv.cols == v.cols, name,
          "dk and dv must match k and v");
  for (const Mat* m : {&dq, &dk, &dv, &dout}) {
    require(m->dtype == q.dtype, name, "gradients must share q's dtype");
  }
  require(scratch.delta != nullptr && scratch.rows >= rows, name,
          "attention scratch was not prepared for this shape (call prepare())");
}

flash::BwdArgs backward_args(const FlashScratch& scratch, Mat dq, Mat dk, Mat dv, Mat dout, Mat q,
                             Mat k, Mat v, Mat out, Mat lse, const flash::FlashDims& d,
                             const RopeTable* rope) {
  flash::BwdArgs args{};
  args.q = q.data;
  args.k = k.data;
  args.v = v.data;
  args.dout = dout.data;
  args.out = out.data;
  args.dq = dq.data;
  args.dk = dk.data;
  args.dv = dv.data;
  args.lse = lse.ptr<const float>();
  args.delta = scratch.delta;
  args.rope = rope != nullptr ? rope->cos_sin : nullptr;
  args.ldq = q.ld;
  args.ldk = k.ld;
  args.ldv = v.ld;
  args.ld_dout = dout.ld;
  args.ld_out = out.ld;
  args.ld_dq = dq.ld;
  args.ld_dk = dk.ld;
  args.ld_dv = dv.ld;
  args.ld_lse = lse.ld;
  args.seq = d.seq;
  args.heads = d.heads;
  args.group = d.group;
  args.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.hd)));
  args.scale_log2 = softmax_scale_log2(d.hd);
  args.vec = aligned16(q) && aligned16(k) && aligned16(v) && aligned16(dout) && aligned16(dq) &&
             aligned16(dk) && aligned16(dv);
  args.vec_delta = aligned16(dout) && aligned16(out);
  args.dq_acc = scratch.dq_acc;
  args.dq_counters = scratch.dq_counters;
  return args;
}

// A 16-bit backward at a head dim the Hopper kernels take: the plan's family.
template <typename T, int HD>
void launch_backward_family(FlashBackwardKernel kernel, const flash::BwdArgs& args, Mat q, Mat k,
                            Mat v, Mat dout, const flash::FlashDims& d, cudaStream_t stream) {
  switch (kernel) {
    case FlashBackwardKernel::Fused:
      flash::launch_backward_fused<T, HD>(args, q, k, v, dout, d, stream);
      break;
    case FlashBackwardKernel::Wgmma:
      flash::launch_backward_wgmma<T, HD>(args, d, stream);
      break;
    case FlashBackwardKernel::Specialized:
      flash::launch_backward_ws<T, HD>(args, q, k, v, dout, d, stream);
      break;
    case FlashBackwardKernel::OneLaunch:
      flash::launch_backward_one_launch<T, HD>(args, d, stream);
      break;
    default:
      flash::launch_backward_tc<T, HD>(args, d, stream);
      break;
  }
}

}  // namespace

void flash_attention_backward(const KernelChoices& kernels, const FlashScratch& scratch, Mat dq,
                              Mat dk, Mat dv, Mat dout, Mat q, Mat k, Mat v, Mat out, Mat lse,
                              const AttentionShape& shape, cudaStream_t stream,
                              const RopeTable* rope) {
  const char* name = "attention_backward (flash)";
  const flash::FlashDims d = check_flash(name, shape, q, k, v, out, lse);
  const std::int64_t rows = static_cast<std::int64_t>(d.batch) * d.heads * d.seq;
  check_backward(name, scratch, dq, dk, dv, dout, q, k, v, rows);
  if (rope != nullptr) require_rope_table(name, rope, d);
  flash::BwdArgs args = backward_args(scratch, dq, dk, dv, dout, q, k, v, out, lse, d, rope);
  const std::int64_t counters = static_cast<std::int64_t>(d.batch) * d.heads * ((d.seq + 63) / 64);
  const bool fused_ready = scratch.dq_acc != nullptr && scratch.counters >= counters &&
                           scratch.dq_acc_elems >= rows * d.hd;
  bool separate_delta = kernels.flash_delta == FlashDelta::Separate;

  dispatch_head_dim(d.hd, name, [&](auto hd_tag) {
    constexpr int HD = decltype(hd_tag)::value;
    dispatch_float(q.dtype, name, [&](auto tag) {
      using T = typename decltype(tag)::type;
      FlashBackwardKernel kernel = FlashBackwardKernel::Mma;
      if constexpr (!std::is_same_v<T, float> && flash::hopper_head_dim(HD))
        kernel = backward_kernel_for(kernels, args);
      if (kernel == FlashBackwardKernel::Fused && !fused_ready) {
        throw RuntimeFailure(std::string(name) +
                             ": the fused backward runs but the attention scratch has no dQ "
                             "accumulator for this shape: prepare() with the plan that runs it");
      }
      // The fused kernel reads D from the delta kernel, which zeroes its counters.
      const bool fused = kernel == FlashBackwardKernel::Fused;
      if (fused) separate_delta = true;
      args.dq_writes_delta = !separate_delta;
      if (separate_delta) {
        flash::launch_delta<T, HD>(scratch.delta, dout, out, args.vec_delta, d, rows, stream,
                                   fused ? scratch.dq_counters : nullptr, fused ? counters : 0);
      }
      if constexpr (std::is_same_v<T, float>) {
        flash::launch_backward_fp32<HD>(args, d, stream);
      } else if constexpr (!flash::hopper_head_dim(HD)) {
        flash::launch_backward_tc<T, HD>(args, d, stream);
      } else {
        launch_backward_family<T, HD>(kernel, args, q, k, v, dout, d, stream);
      }
    });
  });
}

}  // namespace tinyllama::cuda
