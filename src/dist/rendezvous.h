#pragma once
// The one exchange the ranks need before NCCL can connect them: rank 0 makes NCCL's unique id
// (128 opaque bytes) and every other rank must receive it. Two ways, picked by the RankEnv:
//
//  - a file (env.rendezvous_file, set by `tinyllama train --gpus N`): rank 0 writes the blob to a
//    temporary beside the path, syncs it and renames it onto the path, so a reader sees the whole
//    file or none; the others poll for it every 20 ms. A small header (magic + length) tells a
//    partial or foreign file from ours.
//  - TCP (MASTER_ADDR / MASTER_PORT, as torchrun and mpirun users set them): rank 0 listens on all
//    IPv4 addresses at the port and sends the blob to each rank that connects and says hello; the
//    others connect to MASTER_ADDR (a name resolved with getaddrinfo, IPv4) and retry until rank 0
//    is up. The port is MASTER_PORT, except under torchrun's elastic agent
//    (TORCHELASTIC_USE_AGENT_STORE=True): the agent's own store already listens on MASTER_PORT,
//    so the blob goes over MASTER_PORT + 1, which must then be free on rank 0's host too.
#include <chrono>
#include <cstdint>
#include <vector>

#include "dist/rank_env.h"

namespace tinyllama::dist {

// Rank 0 passes the blob and gets it back; other ranks pass {} and receive rank 0's. Blocks until
// done or `timeout` passes (RuntimeFailure naming the rank, address/file and what to check). With
// world == 1 it returns the blob at once, touching no file or socket. In file mode rank 0 returns
// once the file is in place; over TCP it returns once every other rank has received the blob.
std::vector<std::uint8_t> share_from_rank0(const RankEnv& env,
                                           const std::vector<std::uint8_t>& blob,
                                           std::chrono::milliseconds timeout);

}  // namespace tinyllama::dist
