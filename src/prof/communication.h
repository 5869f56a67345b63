#pragma once
// The data-parallel collectives on the GPU's timeline: which kernels are
// NCCL's, how long they ran, and how much of that ran while the GPU was
// computing something else -- the share of the communication "hidden
// behind compute", which is what bucketing the gradient exchange beside the
// backward pass is for (docs/DATA_PARALLEL.md).
//
// A collective's kernel runs from the moment its rank launches it until the
// slowest rank has delivered its data: its duration includes the wait for
// the other ranks, so the communication time is an upper bound on the time
// the transfers took. Overlap is measured on the records alone, so every
// figure here is tested with hand-built records.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "prof/activity.h"
#include "prof/attribution.h"

namespace tinyllama::prof {

// Whether a kernel is one of NCCL's, by its (mangled or demangled) name:
// "ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)" and the rest of NCCL's
// kernels begin with "nccl" (any case); NCCL's one-rank reduction, which a
// one-GPU run (--gpus 1) launches for an averaging collective, is
// "oneRankReduce<...>" in an anonymous namespace.
bool is_communication_kernel(const std::string& name);

// is_communication_kernel for every record (each distinct name looked up once).
std::vector<bool> communication_kernels(const std::vector<KernelRecord>& kernels);

// Per kernel: for a communication kernel, the nanoseconds of its run
// [start, end) during which at least one kernel that is not communication
// ran on another stream of the same device (counted once however many
// did); 0 for every other kernel. Only compute hides communication: two
// NCCL kernels overlapping each other hide nothing, and a kernel on the
// communication kernel's own stream is ordered before or after it.
std::vector<std::int64_t> hidden_behind_compute(const std::vector<KernelRecord>& kernels,
                                                const std::vector<bool>& communication);

// Communication kernels summed over the profiled steps.
struct CommunicationTime {
  std::int64_t kernels = 0;
  std::int64_t kernel_ns = 0;  // their summed durations
  std::int64_t hidden_ns = 0;  // the parts of them hidden behind compute
};

struct CommunicationFigures {
  CommunicationTime total;
  // By op, summed over layers ("backward/grad_exchange", "loss_reduce").
  std::map<std::string, CommunicationTime> by_op;
};

// The communication kernels of the profiled steps (attribution.kernel_in_step),
// each under its op (op_kind_key of attribution.kernel_ops). Every recorded
// kernel that is not communication counts as compute that may hide them,
// whichever step launched it.
CommunicationFigures communication_figures(const GpuActivity& gpu, const Attribution& attribution);

}  // namespace tinyllama::prof
