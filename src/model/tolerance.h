#pragma once
// How far a result may sit from the float64 CPU reference, and how that
// distance is measured: the definitions of the parity test
// (tests/python/test_parity.py's docstring explains each; the numbers are in
// parity_config.py, the metrics in parity_compare.py), kept here once so
// that the `validate` command, `train --validate-setup` and the C++ tests
// judge by the same rules. tests/model/tolerance_test.cc checks that the
// Python constants still state the same numbers.
#include <string>
#include <vector>

#include "core/dtype.h"

namespace tinyllama {

// fp32 against fp64: loss, gradients and weights, metric max_rel_error
// (the parity test's TOL_FP32).
inline constexpr double kFp32Tolerance = 1e-5;
// One AdamW step from a run's own gradients, metric adamw_step_error: exact
// up to fp32 rounding (1e-7 of the update seen; a missing weight decay shows
// at 7e-4 or more). The parity test's TOL_ADAMW.
inline constexpr double kAdamwTolerance = 1e-4;
// Mixed precision: an error may be this many times a baseline's error on the
// same weights and batch, plus one ulp of the compute dtype (amp_limit).
// The parity test's AMP_FACTOR; its baseline is PyTorch autocast.
inline constexpr double kAmpFactor = 2.0;

// One unit in the last place of a compute dtype relative to a tensor's
// largest element, the bound over its binade (torch.finfo(dtype).eps):
// 2^-7 for bfloat16, 2^-10 for float16, 2^-23 for float32.
double compute_ulp(DType compute);

// kAmpFactor * baseline_error + compute_ulp(compute): the parity test's
// limit for a loss or a gradient under --amp.
double amp_limit(double baseline_error, DType compute);

// max|actual - ref| / max|ref| over a tensor (ref the float64 reference);
// +inf when actual holds a non-finite value, 0 for an empty tensor, and
// max|actual - ref| when ref is all zeros.
double max_rel_error(const double* actual, const double* ref, std::size_t n);

// The error of one AdamW step in units of the largest update (max|ref -
// before|), after forgiving 2 fp32 ulps of each reference weight (the
// weights are kept in fp32, and w * (1 - lr wd) and the update round
// apart). +inf when actual holds a non-finite value.
double adamw_step_error(const double* actual, const double* ref, const double* before,
                        std::size_t n);

// "layers.3.wqkv" -> "wqkv": the name of a parameter pooled over layers,
// for reports that give the worst error of each kind of tensor.
std::string param_group(const std::string& slot_name);

}  // namespace tinyllama
