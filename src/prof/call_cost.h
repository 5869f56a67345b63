#pragma once
// Every op family's cost (FLOPs and bytes of one call, from its operands),
// for the profiler that charges them: each is stated beside its op, in
// ops/<family>/*_cost.h, over the shared vocabulary of ops/op_cost.h.
#include "ops/attention/attention_cost.h"
#include "ops/linear/gemm_cost.h"
#include "ops/loss/loss_cost.h"
#include "ops/norm/rmsnorm_cost.h"
#include "ops/op_cost.h"
#include "ops/optimizer/optimizer_cost.h"
#include "ops/rope/rope_cost.h"
#include "ops/swiglu/swiglu_cost.h"
