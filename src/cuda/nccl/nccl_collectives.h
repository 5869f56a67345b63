#pragma once
// NCCL behind model/collectives.h: one communicator per rank process, its
// operations enqueued on the backend's streams (so they are captured into
// the step's CUDA graph with the rest). No NCCL type appears here, so the
// rest of the engine builds the same with or without it (no_nccl.cc).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/collectives.h"

namespace tinyllama {

// "" when this build can run data parallel over NCCL, else why not.
std::string nccl_build_note();
// "2.28.9": the NCCL library loaded at run time.
std::string nccl_version();
// Rank 0 makes the id every rank's communicator is created from (shared
// with the others by dist/rendezvous.h).
std::vector<std::uint8_t> nccl_unique_id();
// Makes CUDA device `device` this process's device, before any backend is
// created (a rank on a host with several GPUs: its local rank).
void select_cuda_device(int device);
// Joins the communicator: blocks until all `world` ranks have called it
// with the same id. NVLink multicast (NVLS) is switched off first.
std::unique_ptr<Collectives> make_nccl_collectives(int rank, int world,
                                                   const std::vector<std::uint8_t>& id);

}  // namespace tinyllama
