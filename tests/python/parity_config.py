"""The parity check's constants: DESIGN.md section 1's, the tolerances and
the configurations every run trains (test_parity.py explains them)."""

import torch


# DESIGN.md section 1 constants.
RMS_EPS = 1e-6
ROPE_THETA = 10000.0
ADAMW = dict(lr=3e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
NUM_STEPS = 3

TOL_FP32 = 1e-5
# One AdamW step from the binary's own gradients is exact up to fp32
# rounding: 1e-7 of the update seen, a missing weight decay 7e-4 or more.
TOL_ADAMW = 1e-4

# --amp: the binary's error may be AMP_FACTOR times PyTorch autocast's, plus
# one unit in the last place of the compute dtype (amp_floor).
AMP_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}
AMP_FACTOR = 2.0
# The first loss scale of tinyllama's LossScaler and of torch's GradScaler.
FP16_LOSS_SCALE = 65536.0

# Small, fixed, deliberately irregular shapes: they must run in seconds on
# two CPU cores, and odd sizes catch indexing bugs that powers of two hide.
# Together they cover K = H (MHA), K = H/2 (GQA), K = 1 (MQA), head_dim 8 to
# 96, sequence lengths that are not powers of two (one above 32, i.e. more
# than one attention tile), a vocab that is not a multiple of anything, and
# three layers (gradients through more than one residual hand-off), and one
# FFN width the Hopper SwiGLU GEMM takes.
CONFIGS = {
    "mha": dict(vocab=101, dim=48, layers=2, heads=4, kv_heads=4, ffn=80,
                seq=19, batch=3, seed=1234),
    "gqa": dict(vocab=67, dim=64, layers=2, heads=4, kv_heads=2, ffn=96,
                seq=23, batch=2, seed=77),
    "mqa": dict(vocab=50, dim=32, layers=3, heads=4, kv_heads=1, ffn=72,
                seq=13, batch=4, seed=9001),
    "hd32": dict(vocab=83, dim=64, layers=1, heads=2, kv_heads=1, ffn=112,
                 seq=37, batch=2, seed=4242),
    # An FFN width that is a multiple of 64 (192: one and a half 128-column
    # tiles), where --swiglu gemm's Hopper kernel runs instead of falling
    # back; a hidden width off the 64-wide k step, 87 rows off the 128-row tile.
    "ffn192": dict(vocab=61, dim=72, layers=2, heads=4, kv_heads=2, ffn=192,
                   seq=29, batch=3, seed=31337),
    # The head_dims the CUDA flash kernels run besides 32 (the widths above
    # fall back to materialised attention there): 64, Hopper's wgmma kernels,
    # over 70 positions (past one 64-row tile); 96, the mma.sync and fp32 ones.
    "hd64": dict(vocab=71, dim=128, layers=2, heads=2, kv_heads=1, ffn=160,
                 seq=70, batch=2, seed=2024),
    "hd96": dict(vocab=59, dim=192, layers=1, heads=2, kv_heads=2, ffn=128,
                 seq=41, batch=2, seed=96),
}
