"""The float8 linear of the PyTorch peer's --precision fp8 (torch_peer.py).

What torchao's float8 training does with its "tensorwise" recipe, written
out on torch._scaled_mm so the peer needs nothing beyond torch:

    forward      out         = x_e4m3 @ w_e4m3^T
    backward     grad_input  = g_e5m2 @ w_e4m3
                 grad_weight = g_e5m2^T @ x_e4m3

Every operand is quantised per call with one scale per tensor from its
current amax (dynamic scaling): scale = fp8_max / max(amax, 1e-12), computed
in fp32; x * scale clamped to +-fp8_max (saturated, as cuBLASLt's and
Transformer Engine's satfinite conversions do) and cast. _scaled_mm gets the
inverse scales (the dequantisation factors) and writes bf16; the gradients
leave in their inputs' dtypes. E4M3 (more mantissa) holds weights and
activations, E5M2 (more range) the output gradient.

torch._scaled_mm wants `a` row-major and `b` column-major (the transpose of a
contiguous matrix), every dimension a multiple of 16, and fp32 scalar scales;
the backward's transposed operands are contiguous copies of the fp8 tensors,
as torchao makes them. Nothing syncs with the host, so torch.compile traces
the Function and CUDA graphs replay it.

Importing this module needs only torch; the float8 dtypes are looked up when
a linear runs, so a torch without them (CI's 1.13) still loads the peer.
"""
import math

import torch
import torch.nn.functional as F

EPS = 1e-12  # torchao's floor on amax: an all-zero tensor gets a finite scale


def _quantize(x, dtype):
    """(x as `dtype` codes, the fp32 inverse scale): tensorwise, from x's amax."""
    fp8_max = torch.finfo(dtype).max
    amax = x.detach().abs().amax().float()
    scale = fp8_max / torch.clamp(amax, min=EPS)
    codes = (x.float() * scale).clamp(-fp8_max, fp8_max).to(dtype)
    return codes, scale.reciprocal()


def _scaled_mm(a, b, a_inv, b_inv):
    """a @ b in bf16 from fp8 operands; a row-major, b column-major."""
    out = torch._scaled_mm(a, b, scale_a=a_inv, scale_b=b_inv, out_dtype=torch.bfloat16)
    return out[0] if isinstance(out, tuple) else out  # torch < 2.4 also returned the amax


def _column_major(t):
    """The same matrix laid out column-major (a transposed contiguous copy)."""
    return t.t().contiguous().t()


class Fp8Matmul(torch.autograd.Function):
    """x [..., in] @ w[out, in]^T with fp8 operands; see the module's note."""

    @staticmethod
    def forward(ctx, x, w):
        x2 = x.reshape(-1, x.shape[-1])
        x8, x_inv = _quantize(x2, torch.float8_e4m3fn)
        w8, w_inv = _quantize(w, torch.float8_e4m3fn)
        out = _scaled_mm(x8.contiguous(), w8.t(), x_inv, w_inv)
        ctx.save_for_backward(x8, x_inv, w8, w_inv)
        ctx.x_shape, ctx.x_dtype, ctx.w_dtype = x.shape, x.dtype, w.dtype
        return out.view(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, grad_out):
        x8, x_inv, w8, w_inv = ctx.saved_tensors
        g = grad_out.reshape(-1, grad_out.shape[-1])
        g8, g_inv = _quantize(g, torch.float8_e5m2)
        grad_x = _scaled_mm(g8.contiguous(), _column_major(w8), g_inv, w_inv)
        grad_w = _scaled_mm(g8.t().contiguous(), _column_major(x8), g_inv, x_inv)
        return grad_x.view(ctx.x_shape).to(ctx.x_dtype), grad_w.to(ctx.w_dtype)


def check_dims(**dims):
    """_scaled_mm's constraint on every GEMM dimension: a multiple of 16."""
    for name, n in dims.items():
        if n % 16:
            raise ValueError("fp8 linear: %s = %d is not a multiple of 16" % (name, n))


def fp8_linear(x, w):
    """The peer's fp8 projection: F.linear(x, w) (no bias) on fp8 tensor cores."""
    return Fp8Matmul.apply(x, w)


def _rel(got, want):
    """Relative Frobenius error, in fp32."""
    got, want = got.float(), want.float()
    return float((got - want).norm() / want.norm().clamp(min=1e-30))


def _run(fn, x, w, g):
    """fn's output and its gradients for x and w, given the output gradient g."""
    x = x.detach().clone().requires_grad_(True)
    w = w.detach().clone().requires_grad_(True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = fn(x, w)
    out.backward(g)
    # Copies: a CUDA-graph replay may reuse the memory of what it returned.
    return out.detach().clone(), x.grad.clone(), w.grad.clone()


def self_check(tokens=512, d_in=512, d_out=1024, seed=0):
    """One fp8 linear against a bf16 linear (autocast, as the bf16 peer runs it)
    on random inputs: the forward and both gradients, eager and under
    torch.compile(mode="reduce-overhead"). Prints the relative errors; returns
    0 when the fp8 errors are a few percent (E4M3's rounding gives about 3-4%
    on the output, E5M2's about 6% on the gradients; a wrong transpose or
    scale gives 100% or more) and the compiled run agrees with the eager
    one, else 1."""
    if not torch.cuda.is_available():
        print("self-check: needs a CUDA device")
        return 1
    cap = torch.cuda.get_device_capability()
    print("self-check: %s (sm_%d%d), torch %s"
          % (torch.cuda.get_device_name(), cap[0], cap[1], torch.__version__))
    torch.manual_seed(seed)
    x = torch.randn(tokens, d_in, device="cuda")
    x[::37] *= 20  # a few outlying rows, as residual streams have
    w = torch.randn(d_out, d_in, device="cuda") * 0.02
    g = (torch.randn(tokens, d_out, device="cuda") * 1e-3).to(torch.bfloat16)
    check_dims(tokens=tokens, d_in=d_in, d_out=d_out)
    want = _run(F.linear, x, w, g)
    eager = _run(fp8_linear, x, w, g)
    compiled_fn = torch.compile(fp8_linear, mode="reduce-overhead")
    for _ in range(3):  # warm-up, recording, replay
        compiled = _run(compiled_fn, x, w, g)
    ok = True
    for i, name in enumerate(("out", "grad_input", "grad_weight")):
        err, agree = _rel(eager[i], want[i]), _rel(compiled[i], eager[i])
        good = math.isfinite(err) and err < 0.15 and math.isfinite(agree) and agree < 1e-2
        ok = ok and good and eager[i].dtype == want[i].dtype
        print("self-check: %-11s fp8 vs bf16 %.4f   compiled vs eager %.2e   %s %s"
              % (name, err, agree, str(eager[i].dtype).replace("torch.", ""),
                 "ok" if good else "FAIL"))
    print("self-check: %s (expect ~0.04 on out, ~0.06 on the gradients, fp8 vs bf16)"
          % ("ok" if ok else "FAILED"))
    return 0 if ok else 1
