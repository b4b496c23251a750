// Each option error of fsdp-shard, and what it needs from earlier passes.
// RUN: not fsdp-opt %s --fsdp-shard=sharding-strategy=ZERO3 2>&1 | FileCheck %s --check-prefix=STRATEGY
// RUN: not fsdp-opt %s --fsdp-shard=world-size=0 2>&1 | FileCheck %s --check-prefix=WORLD
// RUN: not fsdp-opt %s --fsdp-shard=world-size=4294967298 2>&1 | FileCheck %s --check-prefix=WORLDMAX
// RUN: not fsdp-opt %s --fsdp-shard="sharding-strategy=HYBRID_SHARD world-size=4" 2>&1 | FileCheck %s --check-prefix=HYBRID
// RUN: not fsdp-opt %s --fsdp-shard="sharding-strategy=HYBRID_SHARD world-size=4 shard-group-size=3" 2>&1 | FileCheck %s --check-prefix=DIVIDE
// RUN: not fsdp-opt %s --fsdp-shard="world-size=4 shard-group-size=2" 2>&1 | FileCheck %s --check-prefix=GROUP
// RUN: not fsdp-opt %s --fsdp-shard="sharding-strategy=HYBRID_SHARD world-size=4 shard-group-size=2 hybrid-reduction=tree" 2>&1 | FileCheck %s --check-prefix=HYBRIDREDUCTION
// RUN: not fsdp-opt %s --fsdp-shard 2>&1 | FileCheck %s --check-prefix=NOSTEP
// RUN: not fsdp-opt %s --fsdp-shard=reduce-dtype=fp8 2>&1 | FileCheck %s --check-prefix=REDUCEDTYPE
// RUN: not fsdp-opt %s --fsdp-shard=backend=mpi 2>&1 | FileCheck %s --check-prefix=BACKEND
// STRATEGY: error: unknown sharding strategy 'ZERO3': expected FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, OSS or SHARDED_DDP
// WORLD: error: world size must be at least 1, found 0
// WORLDMAX: error: world size 4294967298 and shard-group size 0 must be at most 2147483647 ranks
// HYBRID: error: HYBRID_SHARD needs the shard-group size (the ranks of one node that shard a unit; the groups replicate it)
// DIVIDE: error: shard-group size 3 does not divide the world size 4
// GROUP: error: shard-group size applies to HYBRID_SHARD, not FULL_SHARD
// HYBRIDREDUCTION: error: unknown HYBRID_SHARD reduction 'tree': expected ordered or two-stage
// NOSTEP: error: no @train_step to shard (fsdp-append-loss and fsdp-autodiff build it)
// REDUCEDTYPE: error: unknown reduce dtype 'fp8': expected bf16, f16 or f32
// BACKEND: error: unknown backend 'mpi': expected gloo or nccl
module {
  fsdp.param @w : tensor<3xf32> in "" : "M"
}
