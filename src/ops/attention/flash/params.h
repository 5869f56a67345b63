#pragma once
// What the host hands the flash kernels, and the constants both sides
// compile against: the block size, the argument structs of the forward and
// backward kernels, the problem dimensions the launchers derive grids from,
// and the per-head-dim register budgets (__maxnreg__) of the kernels where
// ptxas' own choice spills.
#include <cstdint>

namespace tinyllama::cuda::flash {

constexpr int kFlashThreads = 128;  // 4 warps
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.69314718055994531f;

struct FwdArgs {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  float* lse;
  std::int64_t ldq, ldk, ldv, ldo, ld_lse;
  int seq, heads, group;
  float scale_log2;  // 1/sqrt(hd) * log2(e): scores live in the exp2 domain
  bool vec;          // every base and row stride allows 16-byte accesses
  // RopeImpl::Fused (rope_tiles.cuh): the [seq, hd/2] (cos, sin) table of
  // rope_epilogue.cuh. q and k are then as the QKV GEMM wrote them: the
  // kernel rotates its Q and K tiles as it loads them and writes q_rot,
  // k_rot (rotated) and v_copy (v) for the backward. nullptr: q and k come
  // rotated, the three outputs are unused.
  const float* rope;
  void* q_rot;
  void* k_rot;
  void* v_copy;
  std::int64_t ld_qr, ld_kr, ld_vc;
};

struct BwdArgs {
  const void* q;
  const void* k;
  const void* v;
  const void* dout;
  const void* out;  // the forward's output: D = rowsum(dO * O)
  void* dq;
  void* dk;
  void* dv;
  const float* lse;
  // D, [B*H, S], row stride seq: written by the dQ kernels' prologue
  // (dq_writes_delta, FlashDelta::InDq) for their own query tile, else by
  // the separate delta kernel before them; read by dQ and then dK/dV.
  float* delta;
  // RopeImpl::Fused: [seq, hd/2] (cos, sin) pairs (rope_epilogue.cuh); dQ
  // and dK leave rotated back by the inverse RoPE. nullptr: no rotation.
  const float* rope;
  // The fused kernel's dQ (backward_fused.cu, dq_ordered.cuh): an fp32
  // accumulator [B*H, S, HD] and a counter per (B*H, 64-row query tile),
  // zeroed by the delta kernel before it. Unused by the other kernels.
  float* dq_acc;
  int* dq_counters;
  std::int64_t ldq, ldk, ldv, ld_dout, ld_out, ld_dq, ld_dk, ld_dv, ld_lse;
  int seq, heads, group;
  float scale;
  float scale_log2;
  bool vec;
  bool dq_writes_delta;
  bool vec_delta;  // dout and out rows allow 16-byte loads (the D sums' layout)
};

// Register budgets where ptxas' own choice under __launch_bounds__ spills a
// few bytes (it aims at 128 registers at hd 64 and 168 at hd 128): enough to
// hold the accumulators, low enough to keep 2-4 blocks per SM. hd 96 takes
// hd 128's: its accumulators are three quarters of those.
constexpr int flash_reg_budget(int hd, int at128, int at64, int at32) {
  return hd > 64 ? at128 : hd > 32 ? at64 : at32;
}

// The head_dims the Hopper (wgmma, TMA) kernels are built for; the others
// (32, 96) run the mma.sync kernels in bf16/fp16, and every head_dim runs
// the fp32 kernels in fp32.
constexpr bool hopper_head_dim(int hd) {
  return hd == 64 || hd == 128;
}

struct FlashDims {
  int batch, seq, heads, kv_heads, hd, group;
};

}  // namespace tinyllama::cuda::flash
