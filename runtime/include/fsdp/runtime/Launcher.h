//===- Launcher.h - fsdp-run --nproc: local ranks ---------------*- C++ -*-===//
//
// `fsdp-run --nproc N` starts N copies of itself as local ranks, with the
// environment torchrun gives its ranks (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) on loopback, forwards
// SIGINT, SIGTERM and SIGHUP to them, and waits for them.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_LAUNCHER_H
#define FSDP_RUNTIME_LAUNCHER_H

#include "fsdp/runtime/RunOptions.h"

namespace fsdp::runtime {

/// `--nproc N`: runs this command (`argv`, without --nproc) as N local
/// ranks (the torchrun environment on loopback) and waits for them. The
/// plan's world size and the outputs are checked first. A rank that fails
/// ends the others; the launcher's status is that of the rank that failed
/// first by itself (not one that stopped because of it). Ranks die with the
/// launcher. Under a launcher (RANK or SLURM_PROCID set) it is an error.
int launchLocalRanks(const RunOptions &o, int argc, char **argv);

/// The intra-op threads `--nproc N` gives each of its `nproc` ranks on this
/// machine: the cores this process may run on (its affinity, as a container
/// or taskset limits it) divided among them, at least 1.
int threadsPerRank(int64_t nproc);

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_LAUNCHER_H
