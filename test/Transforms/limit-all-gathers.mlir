// fsdp-limit-all-gathers takes back prefetch decisions (fsdp.prefetch) that
// would put more than N gathered buffers in flight.
// A buffer freed at the anchor does not count: BACKWARD_POST prefetches even
// under a limit of 1.
// RUN: fsdp-opt %S/Inputs/three-units.mlir --fsdp-prefetch=backward-prefetch=BACKWARD_POST --fsdp-limit-all-gathers=limit=1 | FileCheck %s --check-prefix=POST
// RUN: fsdp-opt %S/Inputs/three-units.mlir --fsdp-prefetch=forward-prefetch=true --fsdp-limit-all-gathers | FileCheck %s --check-prefix=LIMIT2
// RUN: fsdp-opt %S/Inputs/three-units.mlir --fsdp-prefetch=forward-prefetch=true --fsdp-limit-all-gathers=limit=1 | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %S/Inputs/three-units.mlir --fsdp-prefetch=forward-prefetch=true --fsdp-limit-all-gathers=limit=0 | FileCheck %s --check-prefix=LIMIT0

// BACKWARD_POST: b's gather comes after c's free (only neg between): it is
// marked, to start right after the free.
// POST:      fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// POST:      fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// POST:      fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard {fsdp.prefetch = "free"}
// POST:      fsdp.all_gather.start %{{.*}} for @a group {{ *}}shard :

// NONE-NOT: fsdp.prefetch

// Limit 2: b prefetched while a is alive (1 other buffer); c would start
// while a and b are (2): taken back. The backward's each start with one.
// LIMIT2:    fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard {fsdp.prefetch = "wait"}
// LIMIT2:    fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// LIMIT2:    fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// LIMIT2:    fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard {fsdp.prefetch = "wait"}
// LIMIT2:    fsdp.all_gather.start %{{.*}} for @a group {{ *}}shard {fsdp.prefetch = "wait"}

// LIMIT0:    fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard {fsdp.prefetch = "wait"}
// LIMIT0:    fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard {fsdp.prefetch = "wait"}
